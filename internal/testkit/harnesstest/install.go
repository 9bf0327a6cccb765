// Package harnesstest lets tests run the real harness CLIs the shipped process drivers
// drive (Claude Code, Codex) offline: it installs pinned versions with npm into a
// test-only folder (Install, Claude, Codex) and serves a stand-in model provider
// (NewProvider: the streamed Anthropic Messages API and OpenAI Responses API) and a
// stand-in tool bridge (NewBridge: an MCP server over Streamable HTTP) on 127.0.0.1.
package harnesstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Harness is one CLI this package installs: its npm package, the version pinned (the
// one its driver's describe() names as tested) and the binary it puts in
// node_modules/.bin.
type Harness struct {
	Package, Version, Binary string
}

// The pinned harnesses: the versions examples/drivers/claude-code and
// examples/drivers/codex were tested with.
var (
	ClaudeCode = Harness{Package: "@anthropic-ai/claude-code", Version: "2.1.328", Binary: "claude"}
	CodexCLI   = Harness{Package: "@openai/codex", Version: "0.169.0", Binary: "codex"}
)

// CacheEnv names the variable that overrides the install root.
const CacheEnv = "CAPSULEGATE_HARNESS_CACHE"

// Root is $CAPSULEGATE_HARNESS_CACHE, else $HOME/.cache/capsulegate-harnesses.
func Root() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "capsulegate-harnesses")
	}
	return filepath.Join(home, ".cache", "capsulegate-harnesses")
}

// Dir is where h is installed: Root()/<package>@<version>.
func (h Harness) Dir() string { return filepath.Join(Root(), h.Package+"@"+h.Version) }

// Path is the installed binary's path.
func (h Harness) Path() string { return filepath.Join(h.Dir(), "node_modules", ".bin", h.Binary) }

// ErrNoRegistry is returned (wrapped) when npm is missing or its registry unreachable.
var ErrNoRegistry = errors.New("harnesstest: npm or its registry is unreachable")

var installMu sync.Mutex

// Install installs h when it is not yet installed and returns its binary's path. It
// installs into a fresh folder renamed into place, so a concurrent process never sees
// half an install; at worst two processes install once each.
func Install(ctx context.Context, h Harness) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(h.Path()); err == nil {
		return h.Path(), nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoRegistry, err)
	}
	parent := filepath.Dir(h.Dir())
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("harnesstest: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".install-*")
	if err != nil {
		return "", fmt.Errorf("harnesstest: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	if err := os.WriteFile(filepath.Join(tmp, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("harnesstest: %w", err)
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error", h.Package+"@"+h.Version)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		if ping := exec.CommandContext(ctx, npm, "ping"); ping.Run() != nil {
			return "", fmt.Errorf("%w: npm install %s@%s: %v\n%s", ErrNoRegistry, h.Package, h.Version, err, out)
		}
		return "", fmt.Errorf("harnesstest: npm install %s@%s: %v\n%s", h.Package, h.Version, err, out)
	}
	if err := os.Rename(tmp, h.Dir()); err != nil {
		if _, serr := os.Stat(h.Path()); serr != nil { // not another process's install
			return "", fmt.Errorf("harnesstest: %w", err)
		}
	}
	if _, err := os.Stat(h.Path()); err != nil {
		return "", fmt.Errorf("harnesstest: %s@%s installed without %s: %w", h.Package, h.Version, h.Binary, err)
	}
	return h.Path(), nil
}
