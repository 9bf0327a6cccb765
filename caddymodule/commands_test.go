package caddymodule

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestSubcommandFlags: --registry only where a registry is read; --json everywhere.
func TestSubcommandFlags(t *testing.T) {
	root := &cobra.Command{Use: "capsule"}
	addSubcommands(root)
	reads := map[string]bool{"run": true, "install": true, "verify": true, "explain": true, "publish": true, "search": true, "doctor": true, "pack": false, "replay": false,
		"store check": false, "store compact": false, "store migrate": false}
	var leaves []*cobra.Command
	for _, c := range root.Commands() {
		if c.HasSubCommands() {
			leaves = append(leaves, c.Commands()...)
		} else {
			leaves = append(leaves, c)
		}
	}
	for _, c := range leaves {
		name := c.Name()
		if c.Parent() != root {
			name = c.Parent().Name() + " " + name
		}
		want, ok := reads[name]
		if !ok {
			t.Errorf("subcommand %s is not in this test", name)
			continue
		}
		delete(reads, name)
		if got := c.Flags().Lookup("registry") != nil; got != want {
			t.Errorf("%s: --registry offered %v, want %v", name, got, want)
		}
		if c.Flags().Lookup("json") == nil {
			t.Errorf("%s: no --json", name)
		}
	}
	if len(reads) > 0 {
		t.Errorf("missing subcommands: %v", reads)
	}
}
