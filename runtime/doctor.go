package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// HarnessReport is what `caddy capsule doctor` tells of a process capsule's harness
// (docs/reference/process-drivers.md "Doctor").
type HarnessReport struct {
	Driver  string `json:"driver"`
	Harness string `json:"harness"`
	Binary  string `json:"binary"`
	// Path is where the binary was found on the PATH; "" when it was not.
	Path string `json:"path"`
	// Version is the first line the binary printed for the version arguments.
	Version        string   `json:"version"`
	TestedVersions []string `json:"tested_versions"`
	// Tested says Version names one of TestedVersions.
	Tested bool `json:"tested"`
	// Login is logged-in, logged-out or unknown, as the driver read the login check.
	Login       string        `json:"login"`
	LoginDetail string        `json:"login_detail"`
	RequiredEnv []EnvPresence `json:"required_env"`
	// Problems lists what stands in the way of a run, in words.
	Problems []string `json:"problems"`
}

// EnvPresence says whether a variable the harness needs is set.
type EnvPresence struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
}

// doctorTimeout bounds each harness command the doctor runs.
const doctorTimeout = 20 * time.Second

// Doctor stages the process capsule m, as a gateway would, and reports on its harness:
// whether its binary is found, its version against those the driver was tested with, its
// login state as the driver reads it, and whether each variable it needs is set (lookup
// reads the environment; nil is os.LookupEnv). The binary runs on the host, as the
// operator who asks, with only PATH and HOME and the variables it needs.
func (r *Runtime) Doctor(ctx context.Context, m *manifest.Manifest, opts StageOptions, lookup func(string) (string, bool)) (*HarnessReport, error) {
	if !m.IsProcess() {
		return nil, errors.New("doctor reports on a process capsule's harness; this capsule's inference.transport is not process")
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s, err := r.Stage(ctx, m, opts)
	if err != nil {
		return nil, err
	}
	d := s.Process
	rep := &HarnessReport{Driver: m.Inference.Driver.Artifact, Harness: d.Harness, Binary: d.Binary, TestedVersions: d.TestedVersions,
		Login: "unknown", RequiredEnv: []EnvPresence{}, Problems: []string{}}
	env := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, n := range d.RequiredEnv {
		v, ok := lookup(n)
		rep.RequiredEnv = append(rep.RequiredEnv, EnvPresence{Name: n, Present: ok && v != ""})
		if ok && v != "" {
			env = append(env, n+"="+v)
		} else {
			rep.Problems = append(rep.Problems, n+" is not set")
		}
	}
	if rep.Path, err = exec.LookPath(d.Binary); err != nil {
		rep.Path = ""
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s is not on the PATH: install %s", d.Binary, d.Harness))
		return rep, nil
	}
	if out, _, _, err := runHarness(ctx, rep.Path, d.VersionArgs, env); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s %s failed: %v", d.Binary, strings.Join(d.VersionArgs, " "), err))
	} else {
		rep.Version = firstLine(out)
		for _, v := range d.TestedVersions {
			rep.Tested = rep.Tested || v != "" && strings.Contains(rep.Version, v)
		}
		if !rep.Tested {
			rep.Problems = append(rep.Problems, fmt.Sprintf("version %q is not one the driver was tested with (%s)", rep.Version, strings.Join(d.TestedVersions, ", ")))
		}
	}
	if !d.HasLogin {
		rep.LoginDetail = "the driver has no login check"
		return rep, nil
	}
	out, errOut, code, err := runHarness(ctx, rep.Path, d.LoginCheck, env)
	if err != nil && code == nil {
		rep.LoginDetail = err.Error()
		return rep, nil
	}
	drv := murmur.OpenDriver(r.engine, s.Modules[rep.Driver], driverGrants(m))
	defer drv.Close()
	rep.Login, rep.LoginDetail, err = drv.ReadLogin(ctx, abi.LoginOutput{Code: code, Stdout: out, Stderr: errOut})
	if err != nil {
		return nil, err
	}
	if rep.Login == "logged-out" {
		rep.Problems = append(rep.Problems, "the harness is not logged in: "+rep.LoginDetail)
	}
	return rep, nil
}

// runHarness runs path with args and env, bounded by doctorTimeout; code is nil when it
// did not exit by itself.
func runHarness(ctx context.Context, path string, args, env []string) (stdout, stderr string, code *int32, err error) {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env, cmd.Stdin = env, nil
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if st := cmd.ProcessState; st != nil && st.Exited() {
		c := int32(st.ExitCode())
		code = &c
	}
	return o.String(), e.String(), code, err
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
