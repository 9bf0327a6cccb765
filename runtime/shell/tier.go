package shell

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/capsulegate/capsulegate/errs"
)

// Sandbox tiers (docs/sandbox.md), strongest first.
const (
	TierSealed  = "sealed"   // namespaces + minimal root + Landlock + seccomp
	TierScoped  = "scoped"   // Landlock (files and TCP) + seccomp, no namespaces
	TierEnvOnly = "env-only" // environment scrubbing and resource limits only
)

// TierReport says which tier a host can give and why no stronger one.
type TierReport struct {
	Tier       string   // the strongest tier available
	Reasons    []string // why each stronger tier is unavailable; empty for sealed
	Landlock   int      // the kernel's Landlock ABI version; 0 = none
	Seccomp    bool     // seccomp filters are available
	Namespaces bool     // a sealed trial run succeeded (namespaces, idmapped workdir when root)
	// Cgroups is the cgroup version the session's limits are applied with ("v2", "v1"),
	// "" when it has none.
	Cgroups string
}

// rank orders tiers: a higher rank confines more.
func rank(tier string) int {
	switch tier {
	case TierSealed:
		return 3
	case TierScoped:
		return 2
	case TierEnvOnly:
		return 1
	}
	return 0
}

var (
	detectOnce sync.Once
	detected   TierReport
)

// DetectTier reports the strongest tier this host gives subprocesses of this binary,
// trying a sealed run in a temporary folder through the wrapper New would choose
// without Config.WrapperPath; the answer is computed once per process.
func DetectTier() TierReport {
	detectOnce.Do(func() {
		w, err := chooseWrapper("", os.Executable)
		if err != nil {
			detected = TierReport{Tier: TierEnvOnly, Reasons: []string{"cannot find this binary to run the sandbox wrapper: " + err.Error()}}
			return
		}
		dir, err := os.MkdirTemp("", "capsulegate-probe-")
		if err != nil {
			detected = TierReport{Tier: TierEnvOnly, Reasons: []string{"cannot create a probe folder: " + err.Error()}}
			return
		}
		defer os.RemoveAll(dir)
		work, private := dir+"/work", dir+"/records"
		if err := os.Mkdir(work, 0o755); err == nil {
			err = os.Mkdir(private, 0o700)
		}
		if err != nil {
			detected = TierReport{Tier: TierEnvOnly, Reasons: []string{"cannot create a probe folder: " + err.Error()}}
			return
		}
		detected = probeHost(w.Path, work, private)
	})
	return detected
}

// checkMinTier refuses a report weaker than min, naming both tiers, why, and the fix.
func checkMinTier(r TierReport, min string) error {
	if min == "" || rank(r.Tier) >= rank(min) {
		return nil
	}
	return errs.New(CodeMinTier, part,
		fmt.Sprintf("the capsule requires sandbox tier %q but this host gives %q: %s", min, r.Tier, strings.Join(r.Reasons, "; ")),
		fixFor(min))
}

// fixFor tells an operator how to make tier available.
func fixFor(tier string) string {
	switch tier {
	case TierSealed:
		return "run on Linux with Landlock and seccomp enabled and unprivileged user namespaces allowed " +
			"(sysctl kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0, user.max_user_namespaces>0), " +
			"or as root on a filesystem with idmapped mounts; see docs/sandbox.md"
	default:
		return "run on Linux 6.7+ with Landlock (ABI 4+, lsm= includes landlock) and seccomp enabled; see docs/sandbox.md"
	}
}

// interpreters get `-c <command>`; everything else gets the command split into words.
var interpreters = []string{"bash", "sh", "zsh", "dash", "ksh", "fish", "python3", "node"}

// IsInterpreter says whether binary runs a shell tool's command as a script (-c, node -e)
// rather than as words.
func IsInterpreter(binary string) bool { return slices.Contains(interpreters, binary) }

// warnings lists what an operator should know about a sandbox: a tier weaker than
// sealed, allowed binaries missing from the sandbox's PATH, and W-SEC-003 (docs/errors.md
// "Sandbox (`E-SEC-…`, `W-SEC-…`)").
func warnings(r TierReport, allow []string, missing []string, networked bool) []*errs.Error {
	var out []*errs.Error
	if r.Tier != TierSealed {
		out = append(out, errs.New(WarnWeakTier, part,
			fmt.Sprintf("shell and native tools run in sandbox tier %q, weaker than sealed: %s", r.Tier, strings.Join(r.Reasons, "; ")),
			fixFor(TierSealed)))
	}
	for _, b := range missing {
		out = append(out, errs.New(WarnNoBinary, part,
			fmt.Sprintf("shell.allow names %q, which is not on the sandbox's PATH (%s); calls to it will fail", b, sandboxPATH),
			"install it under /usr/bin or /usr/local/bin, or remove it from capabilities.shell.allow"))
	}
	if networked && r.Tier == TierEnvOnly {
		for _, b := range allow {
			if slices.Contains(interpreters, b) {
				out = append(out, errs.New(WarnNetwork, part,
					fmt.Sprintf("shell.allow has the interpreter %q and network.allow is not empty, but tier %q cannot confine the subprocess's own connections: only programs honouring HTTP(S)_PROXY go through the network policy", b, r.Tier),
					"run where the sealed or scoped tier is available, or remove the interpreter or the network rules"))
				break
			}
		}
	}
	return out
}
