package shell

import (
	"os"
	"path/filepath"
)

// The wrapper is this binary started with argv[0] = wrapperArg0 and stageEnv set to the
// stage; both are needed, so no ordinary start can turn into the wrapper by accident.
const (
	stageEnv    = "CAPSULEGATE_SANDBOX_STAGE"
	wrapperArg0 = "capsulegate-sandbox"
	stageOuter  = "outer"  // sealed: namespaces and the minimal root
	stageReaper = "reaper" // scoped and env-only: a subreaper that kills what the tool leaves
	stageInner  = "inner"  // limits, Landlock, seccomp, then the tool
	// stageVersion prints the protocol and exits: how the gateway checks a helper. It
	// stays as it is across releases, or mismatched helpers could not be told apart.
	stageVersion = "version"
	// rootEnv="1" tells the outer stage the gateway runs as root, before it reads the
	// command: it starts the inner stage first, and as root that one needs its own user
	// namespace (the command's RootMode must agree).
	rootEnv = "CAPSULEGATE_SANDBOX_ROOT"
)

// init makes every binary importing this package a working wrapper, including builds
// whose main function is generated (xcaddy) and test binaries.
func init() { MaybeWrapper() }

// MaybeWrapper runs the sandbox wrapper and exits when this process was started as the
// wrapper (asked for its protocol, it prints Protocol), and returns at once otherwise.
// The package's init calls it; a main may call it first thing as well.
func MaybeWrapper() {
	stage := os.Getenv(stageEnv)
	if stage == "" || filepath.Base(os.Args[0]) != wrapperArg0 {
		return
	}
	if stage == stageVersion {
		os.Exit(printProtocol())
	}
	os.Exit(wrapperMain(stage))
}

// child is a started command: the wrapper, and through it the tool.
type child struct {
	setup    *os.File              // read end of the pipe the wrapper reports setup failures on
	kill     func()                // kills everything the command started
	signal   func(os.Signal) error // signals the wrapper, which hands SIGINT on to the command
	waitExit func()                // returns once the wrapper exited, without reaping it
	reap     func() (int, error)   // kills leftovers, reaps the wrapper, returns the exit code
}

// wrapperEnv is the whole environment of a wrapper stage; the tool gets its own. GORACE
// spares a race-enabled build (tests) the race runtime's one-second sleep at exit.
func wrapperEnv(stage string, rootMode bool) []string {
	env := []string{stageEnv + "=" + stage, "GORACE=atexit_sleep_ms=0"}
	if rootMode {
		env = append(env, rootEnv+"=1")
	}
	return env
}
