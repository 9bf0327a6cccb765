// Package ocitest starts real OCI distribution registries for tests: Debian's
// docker-registry (distribution 2.8), storing blobs in a folder of the test's temp
// folder, listening on a free port of 127.0.0.1, without authentication.
//
// A test calls Start, which calls Need first (skipped when the binary is missing, failed
// under CI=true), and may Stop and Restart the registry to see what its code does while
// the registry is down. When the tests run as root the registry runs as nobody, owning its
// storage; on Linux it is killed with the test binary should that die without cleaning up.
package ocitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/ports"
	"github.com/capsulegate/capsulegate/internal/testkit/serverproc"
)

const (
	binary     = "docker-registry"
	debianPath = "/usr/bin/docker-registry"
	installFix = "apt-get install docker-registry"
	tries      = 5 // starts on a busy port before giving up
	logFile    = "registry.log"
	// Prefix is the repository path URL names: every artifact lives under it.
	Prefix = "ci/capsules"
)

// Binary finds docker-registry on PATH, else where Debian installs it; an error says how
// to install it.
func Binary() (string, error) {
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	if fi, err := os.Stat(debianPath); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return debianPath, nil
	}
	return "", fmt.Errorf("ocitest: %s (the OCI distribution registry) is missing, neither on PATH nor at %s: %s", binary, debianPath, installFix)
}

// Need is called by tests that need a registry: when the binary is missing it fails the
// test under CI=true, where a skip would hide that nothing was tested, and skips it
// elsewhere, both saying how to install it.
func Need(t testing.TB) {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Registry is one running (or stopped) docker-registry and its storage.
type Registry struct {
	// Addr is "127.0.0.1:<port>"; it stays the same across Stop and Restart.
	Addr string
	// Storage is the filesystem driver's root: a blob's bytes are at
	// <Storage>/docker/registry/v2/blobs/sha256/<first two hex>/<hex>/data.
	Storage string

	t    testing.TB
	bin  string
	dir  string              // config.yml, registry.log, storage/
	who  *serverproc.Account // the account the registry runs as; nil: ours
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

// Start starts a registry for t on a free port of 127.0.0.1 and stops it when t ends,
// printing its log if t failed. It fails t if the registry does not come up.
func Start(t testing.TB) *Registry {
	t.Helper()
	Need(t)
	bin, _ := Binary()
	who, err := serverAccount()
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{t: t, bin: bin, who: who, dir: storageDir(t, who)}
	r.Storage = filepath.Join(r.dir, "storage")
	if err := os.MkdirAll(r.Storage, 0o755); err != nil {
		t.Fatalf("ocitest: %v", err)
	}
	if err := who.Own(r.dir); err != nil {
		t.Fatalf("ocitest: giving the storage folder to the registry's user: %v", err)
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("ocitest: %s", r.logTail())
		}
	})
	for i := 0; ; i++ {
		port, err := ports.Free()
		if err != nil {
			t.Fatalf("ocitest: %v", err)
		}
		r.port = port
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		busy, err := r.start()
		if err == nil {
			return r
		}
		if !busy || i == tries-1 {
			t.Fatal(err)
		}
	}
}

// storageDir is the registry's folder: t's temp folder, opened to the registry's user
// when that is another one (testing makes it private), or a folder of /tmp when a parent
// stays closed to that user (a root-only TMPDIR).
func storageDir(t testing.TB, who *serverproc.Account) string {
	dir := t.TempDir()
	if who == nil {
		return dir
	}
	// The test's own folder and the one testing made for this test binary's tests.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		_ = os.Chmod(d, 0o711)
	}
	if serverproc.Traversable(dir) {
		return dir
	}
	dir, err := os.MkdirTemp("/tmp", "capsulegate-ocireg-*")
	if err != nil {
		t.Fatalf("ocitest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serverAccount is the account to run the registry as: nil (ours) unless we are root;
// then nobody, so that a registry bug cannot touch what root may.
func serverAccount() (*serverproc.Account, error) {
	who, err := serverproc.Unprivileged("nobody")
	if err != nil {
		return nil, fmt.Errorf("ocitest: running as root, and no user nobody to run the registry as: %w", err)
	}
	return who, nil
}

// URL is the registry source naming this registry's Prefix:
// oci+http://127.0.0.1:<port>/ci/capsules.
func (r *Registry) URL() string { return "oci+http://" + r.Addr + "/" + Prefix }

// config is the registry's config.yml: filesystem storage, this address, no auth, quiet
// logs, no upload purging (a test's registry lives for seconds).
func (r *Registry) config() string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
`, strconv.Quote(r.Storage), r.Addr)
}

// start runs the registry and waits until GET /v2/ answers; busy says the failure was
// the port being taken.
func (r *Registry) start() (busy bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return false, nil
	}
	conf := filepath.Join(r.dir, "config.yml")
	if err := os.WriteFile(conf, []byte(r.config()), 0o644); err != nil {
		return false, fmt.Errorf("ocitest: %w", err)
	}
	logPath := filepath.Join(r.dir, logFile)
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return false, fmt.Errorf("ocitest: %w", err)
	}
	defer log.Close() // the child keeps its own descriptor
	from, _ := log.Seek(0, io.SeekEnd)

	cmd := exec.Command(r.bin, "serve", conf)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = environ()
	runAs(cmd, r.who)
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("ocitest: starting %s: %w", r.bin, err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited = cmd, exited
	go func() {
		_ = cmd.Wait() // the log says why it exited
		close(exited)
	}()

	if err := waitReady(r.Addr, exited, time.Minute); err != nil {
		r.stopLocked()
		tail := r.logTailFrom(from)
		return strings.Contains(tail, "address already in use"), fmt.Errorf("ocitest: %s on %s: %v\n%s", r.bin, r.Addr, err, tail)
	}
	return false, nil
}

// waitReady polls GET /v2/ until it answers 200, the process exits or limit passes.
func waitReady(addr string, exited <-chan struct{}, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /v2/ answered %s", resp.Status)
		}
		last = err
		select {
		case <-exited:
			return errors.New("the registry exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("no answer to GET /v2/ within %v: %v", limit, last)
		case <-tick.C:
		}
	}
}

// environ is ours without REGISTRY_* variables, which would override config.yml.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REGISTRY_") {
			env = append(env, kv)
		}
	}
	return env
}

// Stop stops the registry (SIGTERM, then SIGKILL after 10 s) and waits for it to exit;
// its storage stays for Restart. Stopping a stopped registry does nothing.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *Registry) stopLocked() {
	if r.cmd == nil {
		return
	}
	cmd, exited := r.cmd, r.exited
	r.cmd, r.exited = nil, nil
	_ = cmd.Process.Signal(terminate)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts a stopped registry again on the same port and storage, retrying a few
// times while the port is still taken; it fails the test if the registry does not come up.
func (r *Registry) Restart() {
	r.t.Helper()
	for i := 1; ; i++ {
		busy, err := r.start()
		if err == nil {
			return
		}
		if !busy || i == tries {
			r.t.Fatal(err)
		}
		time.Sleep(time.Duration(i) * 200 * time.Millisecond) // a port held by a closing socket
	}
}

// logTail is the whole log, at most its last 8 KiB.
func (r *Registry) logTail() string { return r.logTailFrom(0) }

// logTailFrom is the log from offset from, at most its last 8 KiB, for an error.
func (r *Registry) logTailFrom(from int64) string {
	return serverproc.LogTail(filepath.Join(r.dir, logFile), "registry log", from, 8<<10)
}
