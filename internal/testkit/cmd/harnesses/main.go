// Command harnesses installs the harness CLIs the process-driver tests run, Claude Code
// and Codex at the versions internal/testkit/harnesstest pins, with npm into a test-only folder
// (default $HOME/.cache/capsulegate-harnesses/<package>@<version>; CAPSULEGATE_HARNESS_CACHE
// overrides it), and prints each binary's path. It is idempotent: an installed version
// is left as it is.
//
//	go run ./internal/testkit/cmd/harnesses [claude|codex]...
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
)

func main() {
	names := os.Args[1:]
	if len(names) == 0 {
		names = []string{"claude", "codex"}
	}
	for _, n := range names {
		h, ok := map[string]harnesstest.Harness{"claude": harnesstest.ClaudeCode, "codex": harnesstest.CodexCLI}[n]
		if !ok {
			fmt.Fprintf(os.Stderr, "harnesses: unknown harness %q (claude, codex)\n", n)
			os.Exit(2)
		}
		path, err := harnesstest.Install(context.Background(), h)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s@%s: %s\n", h.Package, h.Version, path)
	}
}
