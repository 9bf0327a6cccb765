package caddymodule

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestSubcommandFlags: --registry only where a registry is read; --json everywhere.
func TestSubcommandFlags(t *testing.T) {
	root := &cobra.Command{Use: "capsule"}
	addSubcommands(root)
	reads := map[string]bool{"run": true, "install": true, "verify": true, "publish": true, "pack": false, "replay": false}
	for _, c := range root.Commands() {
		want, ok := reads[c.Name()]
		if !ok {
			t.Errorf("subcommand %s is not in this test", c.Name())
			continue
		}
		delete(reads, c.Name())
		if got := c.Flags().Lookup("registry") != nil; got != want {
			t.Errorf("%s: --registry offered %v, want %v", c.Name(), got, want)
		}
		if c.Flags().Lookup("json") == nil {
			t.Errorf("%s: no --json", c.Name())
		}
	}
	if len(reads) > 0 {
		t.Errorf("missing subcommands: %v", reads)
	}
}
