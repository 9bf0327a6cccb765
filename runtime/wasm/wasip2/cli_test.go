package wasip2_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

func TestCLI(t *testing.T) {
	g := newGuest(t, "testdata/cli.wat", wasip2.Env{Env: []string{"A=1", "B=x=y"}, Args: []string{"prog", "--flag"}})
	g.must("get-environment", ret)
	list, n := g.u32(ret), g.u32(ret+4)
	if n != 2 || string(g.list(list)) != "A" || string(g.list(list+8)) != "1" || string(g.list(list+16+8)) != "x=y" {
		t.Errorf("environment: %d entries", n)
	}
	g.must("get-arguments", ret)
	list, n = g.u32(ret), g.u32(ret+4)
	if n != 2 || string(g.list(list+8)) != "--flag" {
		t.Errorf("arguments: %d", n)
	}
	g.must("initial-cwd", ret)
	if g.u8(ret) != 0 {
		t.Error("initial-cwd is set")
	}
	g.must("get-terminal-stdout", ret)
	if g.u8(ret) != 0 {
		t.Error("stdout is a terminal")
	}
	g.must("wall-now", ret)
	if s := int64(g.u64(ret)); s < time.Now().Unix()-60 || g.u32(ret+8) >= 1e9 {
		t.Errorf("wall-clock now %d s %d ns", s, g.u32(ret+8))
	}
	g.must("get-random-bytes", 32, ret)
	if b := g.list(ret); len(b) != 32 {
		t.Errorf("%d random bytes", len(b))
	}
	if g.must("get-random-u64")[0] == g.must("get-random-u64")[0] {
		t.Error("two random u64s are equal")
	}
	g.must("insecure-seed", ret)
	_, err := g.call("get-random-bytes", 1<<40, ret)
	wantTrap(t, err, wasip2.CodeLimit)
	_, err = g.call("get-environment", 0xFFFFFFFC)
	wantTrap(t, err, wasip2.CodeABI)

	for _, tt := range []struct {
		status uint64
		code   uint32
	}{{0, 0}, {1, 1}} {
		_, err := g.call("exit", tt.status)
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tt.code {
			t.Errorf("exit(%d) = %v, want exit code %d", tt.status, err, tt.code)
		}
	}
}
