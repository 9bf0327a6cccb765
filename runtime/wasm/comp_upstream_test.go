package wasm

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// upstreamMirror is the bare git mirror of upstream Murmur, present on development
// machines only; the tests over its fixtures skip without it. The fixtures are read
// from git at test time and never copied into this repository.
const upstreamMirror = "/work/.mirror/murmur-nexus+murmur/repo"

// upstreamFixture returns the bytes of path at the mirror's HEAD, skipping the test when
// the mirror is absent.
func upstreamFixture(tb testing.TB, path string) []byte {
	tb.Helper()
	if _, err := os.Stat(upstreamMirror); err != nil {
		tb.Skip("no upstream Murmur mirror at " + upstreamMirror)
	}
	out, err := exec.Command("git", "-C", upstreamMirror, "show", "HEAD:"+path).Output()
	if err != nil {
		tb.Fatalf("git show %s: %v", path, err)
	}
	return out
}

const fixtureDir = "crates/murmur-cli/tests/fixtures/"

func TestUpstreamEchoTool(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := e.Compile(ctx, "up", "echo-tool", manifest.RoleTool, upstreamFixture(t, fixtureDir+"run/components/echo-tool.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := mod.CheckWorld(string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	data := "hello"
	out, err := e.CallTool(ctx, mod, Grants{MemoryBytes: 16 << 20}, &Imports{}, abi.ToolInput{Data: &data})
	if err != nil {
		t.Fatal(err)
	}
	if out.Data == nil || *out.Data != "hello" || out.Status != abi.StatusPassed {
		t.Fatalf("got %+v", out)
	}
}
