package watbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// embedScript runs jco's component embedding with the filesystem visible: `jco embed`
// of the pinned version gives its wasm-tools no preopens, so it cannot read any --wit
// path. Arguments: the jco-transpile folder, the core module, the WIT folder, the world,
// the output.
const embedScript = `import { readFile, writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
const [transpile, core, wit, world, out] = process.argv.slice(2);
const fs = await import(pathToFileURL(join(transpile, "node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js")));
fs._setPreopens({ "/": "/" });
const { componentEmbed } = await import(pathToFileURL(join(transpile, "dist/wasm-tools.js")));
try {
  await writeFile(out, await componentEmbed({ binary: await readFile(core), witPath: wit, worldName: world }));
} catch (e) {
  console.error(String(e.payload ?? e));
  process.exit(1);
}
`

// BuildComponent wraps the core module core into a component the way `jco new
// --wasi-reactor` does (wit-component with the preview1 reactor adapter), after
// embedding the world of the single WIT file wit, and returns the path of the cached
// component. The cache key covers the module, the WIT, the world and the jco pin.
func BuildComponent(ctx context.Context, core []byte, wit, world string) (string, error) {
	witSrc, err := os.ReadFile(wit)
	if err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "jco %s\nworld %s\n%d\n", toolsKey(), world, len(witSrc))
	h.Write(witSrc)
	h.Write(core)
	key := hex.EncodeToString(h.Sum(nil))
	return cached(ctx, key, "component-"+world+"-"+key[:32]+".wasm", func(node, bin, tmp string) (string, error) {
		// wit-parser reads a folder as one package: the WIT file alone in one.
		witDir := filepath.Join(tmp, "wit")
		if err := os.MkdirAll(witDir, 0o755); err != nil {
			return "", fmt.Errorf("watbuild: %w", err)
		}
		files := map[string][]byte{filepath.Join(tmp, "core.wasm"): core, filepath.Join(tmp, "embed.mjs"): []byte(embedScript), filepath.Join(witDir, "world.wit"): witSrc}
		for p, b := range files {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return "", fmt.Errorf("watbuild: %w", err)
			}
		}
		jcoDir := filepath.Dir(filepath.Dir(bin)) // node_modules/@bytecodealliance/jco
		transpile := filepath.Join(filepath.Dir(jcoDir), "jco-transpile")
		embedded, comp := filepath.Join(tmp, "embedded.wasm"), filepath.Join(tmp, "component.wasm")
		for _, args := range [][]string{
			{filepath.Join(tmp, "embed.mjs"), transpile, filepath.Join(tmp, "core.wasm"), witDir, world, embedded},
			{bin, "new", embedded, "--wasi-reactor", "-o", comp},
		} {
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Dir = tmp
			if msg, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("watbuild: %v: %w\n%s", args[:2], err, msg)
			}
		}
		if _, err := os.Stat(comp); err != nil {
			return "", fmt.Errorf("watbuild: jco new wrote no component: %w", err)
		}
		return comp, nil
	})
}

// Component is BuildComponent for tests: it returns the component's bytes, skipping t
// without node or npm (unless $CI is "true").
func Component(t testing.TB, core []byte, wit, world string) []byte {
	t.Helper()
	out, err := BuildComponent(context.Background(), core, wit, world)
	return readBuilt(t, out, err)
}

// RunOnlyWIT writes our murmur:tool WIT file (wit/murmur-tool-0.1.0.wit) reduced to its
// run interface and a world, named world, that only exports it: Go tools import nothing
// but preview1, and the file's other packages cannot be embedded by the pinned
// wit-parser (murmur:stream's name is a keyword to it). It returns the new file's path.
func RunOnlyWIT(t testing.TB, witFile, world string) string {
	t.Helper()
	src, err := os.ReadFile(witFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, "\n/// A tool")
	if i < 0 {
		t.Fatalf("%s no longer has the tool world's comment", witFile)
	}
	path := filepath.Join(t.TempDir(), "tool.wit")
	if err := os.WriteFile(path, []byte(s[:i]+"\nworld "+world+" {\n  export run;\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
