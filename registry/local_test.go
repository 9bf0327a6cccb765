package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/digest"
)

// wasmArtifact is a wasm tool archive; body varies the payload, and so the hash.
func wasmArtifact(name, version, body string) []byte {
	return makeZip(zent{name: "murmur.yaml", data: fmt.Sprintf("name: %s\nversion: %s\nruntime: tool\ndescription: test tool\n", name, version)},
		zent{name: "capsule.wasm", data: wasmMagic + body})
}

func nativeArtifact(name, version, body string) []byte {
	return makeZip(zent{name: "murmur.yaml", data: fmt.Sprintf("name: %s\nversion: %s\nruntime: tool\nimplementation: native\n", name, version)},
		zent{name: "bin/" + name, data: "#!/bin/sh\n" + body})
}

func skillArtifact(name, version string) []byte {
	return makeZip(zent{name: "murmur.yaml", data: fmt.Sprintf("name: %s\nversion: %s\nruntime: skill\n", name, version)},
		zent{name: "skill.md", data: "# " + name})
}

func mustPublish(t *testing.T, l *Local, data []byte, platform string) *Blob {
	t.Helper()
	b, err := l.Publish(context.Background(), data, platform)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPublishFetch(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(filepath.Join(t.TempDir(), "registry"))
	when := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return when }
	data := wasmArtifact("echo-tool", "1.0.0", "v1")
	b := mustPublish(t, l, data, "")
	if b.Name != "echo-tool" || b.Version != "1.0.0" || b.Platform != "" || b.SHA256 != digest.Hex(data) || string(b.Data) != string(data) {
		t.Fatalf("publish answered %+v", b)
	}

	vdir := filepath.Join(l.Root, "echo-tool", "1.0.0")
	sumLine, err := os.ReadFile(filepath.Join(vdir, "echo-tool-1.0.0.sha256"))
	if err != nil || string(sumLine) != digest.Hex(data)+"  echo-tool-1.0.0.mur.zip\n" {
		t.Fatalf(".sha256 = %q, %v", sumLine, err)
	}
	var meta Meta
	raw, err := os.ReadFile(filepath.Join(vdir, "echo-tool-1.0.0.meta.json"))
	if err != nil || json.Unmarshal(raw, &meta) != nil {
		t.Fatalf("meta.json: %s %v", raw, err)
	}
	wantMeta := Meta{Name: "echo-tool", Version: "1.0.0", Runtime: "tool", Implementation: "wasm", SHA256: digest.Hex(data), Size: int64(len(data)), Description: "test tool", Published: when}
	if !reflect.DeepEqual(meta, wantMeta) {
		t.Fatalf("meta %+v, want %+v", meta, wantMeta)
	}
	assertEmpty(t, vdir, "echo-tool-1.0.0.mur.zip", "echo-tool-1.0.0.sha256", "echo-tool-1.0.0.meta.json")

	for _, p := range []string{"", PlatformLinuxX86_64, PlatformDarwinAarch64} {
		got, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0", Platform: p})
		if err != nil {
			t.Fatalf("fetch for %q: %v", p, err)
		}
		if got.Platform != "" || got.SHA256 != digest.Hex(data) || string(got.Data) != string(data) {
			t.Fatalf("fetch for %q answered %+v", p, got)
		}
	}

	t.Run("republish identical is a no-op", func(t *testing.T) {
		l.now = func() time.Time { return when.Add(time.Hour) }
		if _, err := l.Publish(ctx, data, ""); err != nil {
			t.Fatal(err)
		}
		if again, _ := os.ReadFile(filepath.Join(vdir, "echo-tool-1.0.0.meta.json")); string(again) != string(raw) {
			t.Fatal("identical republish rewrote the metadata")
		}
	})
	t.Run("republish different is refused", func(t *testing.T) {
		other := wasmArtifact("echo-tool", "1.0.0", "v2")
		_, err := l.Publish(ctx, other, "")
		e := assertCode(t, err, CodeConflict)
		if !strings.Contains(e.Msg, digest.Hex(data)) || !strings.Contains(e.Msg, digest.Hex(other)) || !strings.Contains(e.Fix, "bump the version") {
			t.Fatalf("conflict message lacks a hash or the fix: %v", e)
		}
		got, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0"})
		if err != nil || got.SHA256 != digest.Hex(data) {
			t.Fatalf("after a refused publish, fetch answers %v, %v", got, err)
		}
	})
	t.Run("republish repairs a lost sha256", func(t *testing.T) {
		os.Remove(filepath.Join(vdir, "echo-tool-1.0.0.sha256"))
		_, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0"})
		assertCode(t, err, CodeHashFile)
		mustPublish(t, l, data, "")
		if _, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPublishPlatforms(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(t.TempDir())
	linux := nativeArtifact("git-helper", "0.3.1", "linux")
	darwin := nativeArtifact("git-helper", "0.3.1", "darwin")

	_, err := l.Publish(ctx, linux, "")
	assertCode(t, err, CodePlatformNeeded)
	_, err = l.Publish(ctx, linux, "linux-amd64")
	assertCode(t, err, CodePlatform)
	_, err = l.Publish(ctx, wasmArtifact("echo-tool", "1.0.0", ""), PlatformLinuxX86_64)
	assertCode(t, err, CodePlatformExtra)
	_, err = l.Publish(ctx, skillArtifact("style", "1.0.0"), PlatformLinuxX86_64)
	assertCode(t, err, CodePlatformExtra)

	b := mustPublish(t, l, linux, PlatformLinuxX86_64)
	if b.Platform != PlatformLinuxX86_64 {
		t.Fatalf("publish answered platform %q", b.Platform)
	}
	if _, err := os.Stat(filepath.Join(l.Root, "git-helper", "0.3.1", "git-helper-0.3.1-linux-x86_64.mur.zip")); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, l, darwin, PlatformDarwinAarch64)
	mustPublish(t, l, linux, PlatformLinuxX86_64) // identical again: fine
	_, err = l.Publish(ctx, darwin, PlatformLinuxX86_64)
	assertCode(t, err, CodeConflict)

	for p, want := range map[string][]byte{PlatformLinuxX86_64: linux, PlatformDarwinAarch64: darwin} {
		got, err := l.Fetch(ctx, Ref{Name: "git-helper", Version: "0.3.1", Platform: p})
		if err != nil || got.Platform != p || string(got.Data) != string(want) {
			t.Fatalf("fetch %s: %+v, %v", p, got, err)
		}
	}
	for _, p := range []string{PlatformLinuxAarch64, ""} {
		_, err := l.Fetch(ctx, Ref{Name: "git-helper", Version: "0.3.1", Platform: p})
		e := assertCode(t, err, CodeNoVariant)
		if !strings.Contains(e.Msg, "darwin-aarch64, linux-x86_64") && !strings.Contains(e.Msg, "linux-x86_64, darwin-aarch64") {
			t.Fatalf("no-variant message does not list the platforms: %v", e)
		}
	}

	// A platform-independent build beside native ones serves the other platforms.
	generic := wasmArtifact("git-helper", "0.3.1", "")
	mustPublish(t, l, generic, "")
	got, err := l.Fetch(ctx, Ref{Name: "git-helper", Version: "0.3.1", Platform: PlatformLinuxAarch64})
	if err != nil || got.Platform != "" || string(got.Data) != string(generic) {
		t.Fatalf("fallback fetch: %+v, %v", got, err)
	}
	got, err = l.Fetch(ctx, Ref{Name: "git-helper", Version: "0.3.1", Platform: PlatformLinuxX86_64})
	if err != nil || got.Platform != PlatformLinuxX86_64 {
		t.Fatalf("the platform file must win: %+v, %v", got, err)
	}
}

func TestFetchRefuses(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(t.TempDir())
	for _, v := range []string{"1.10.0", "1.2.0", "1.0.0"} {
		mustPublish(t, l, wasmArtifact("echo-tool", v, v), "")
	}
	vdir := filepath.Join(l.Root, "echo-tool", "1.0.0")
	zipPath := filepath.Join(vdir, "echo-tool-1.0.0.mur.zip")
	sumPath := filepath.Join(vdir, "echo-tool-1.0.0.sha256")

	t.Run("unknown name", func(t *testing.T) {
		_, err := l.Fetch(ctx, Ref{Name: "nope", Version: "1.0.0"})
		assertCode(t, err, CodeNotFound)
	})
	t.Run("unknown version lists the others", func(t *testing.T) {
		_, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "9.9.9"})
		e := assertCode(t, err, CodeNotFound)
		if !strings.Contains(e.Msg, "1.0.0, 1.2.0, 1.10.0") {
			t.Fatalf("message does not list the versions in order: %v", e)
		}
	})
	t.Run("bad refs", func(t *testing.T) {
		for ref, code := range map[Ref]string{
			{Name: "../etc", Version: "1"}:                             CodeArtifactName,
			{Name: "Echo", Version: "1"}:                               CodeArtifactName,
			{Name: "echo-tool", Version: "../../etc"}:                  CodeArtifactVersion,
			{Name: "echo-tool", Version: "1/2"}:                        CodeArtifactVersion,
			{Name: "echo-tool", Version: "latest"}:                     CodeArtifactVersion,
			{Name: "echo-tool", Version: ""}:                           CodeArtifactVersion,
			{Name: "echo-tool", Version: "1.0.0", Platform: "win-x86"}: CodePlatform,
		} {
			_, err := l.Fetch(ctx, ref)
			assertCode(t, err, code)
		}
	})
	t.Run("tampered archive", func(t *testing.T) {
		orig, _ := os.ReadFile(zipPath)
		defer os.WriteFile(zipPath, orig, 0o644)
		bad := append([]byte(nil), orig...)
		bad[len(bad)-1] ^= 0xff
		os.WriteFile(zipPath, bad, 0o644)
		_, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0"})
		e := assertCode(t, err, CodeHashMismatch)
		for _, want := range []string{"echo-tool@1.0.0", zipPath, digest.Hex(orig), digest.Hex(bad)} {
			if !strings.Contains(e.Msg, want) {
				t.Errorf("mismatch message lacks %q: %v", want, e)
			}
		}
	})
	t.Run("sha256 files", func(t *testing.T) {
		orig, _ := os.ReadFile(sumPath)
		defer os.WriteFile(sumPath, orig, 0o644)
		sum := strings.Fields(string(orig))[0]
		for content, code := range map[string]string{
			sum:                       "",
			sum + "\n":                "",
			sum + " *other-name\n":    "",
			strings.ToUpper(sum):      CodeHashFile,
			sum[:63]:                  CodeHashFile,
			"":                        CodeHashFile,
			"sha256:" + sum:           CodeHashFile,
			strings.Repeat("0", 64):   CodeHashMismatch,
			" \n" + sum + "  x.zip\n": "",
		} {
			os.WriteFile(sumPath, []byte(content), 0o644)
			_, err := l.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0"})
			if code == "" {
				if err != nil {
					t.Errorf(".sha256 %q: %v", content, err)
				}
				continue
			}
			assertCode(t, err, code)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Fetch(c, Ref{Name: "echo-tool", Version: "1.0.0"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		if _, err := l.Publish(c, wasmArtifact("other", "1", ""), ""); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestPublishRefusesHostileArchives(t *testing.T) {
	root := filepath.Join(t.TempDir(), "registry")
	l := NewLocal(root)
	for data, code := range map[*[]byte]string{
		ptr(makeZip(manifestEnt, wasmEnt, zent{name: "../x", data: "x"})):                 CodeDotDot,
		ptr(makeZip(manifestEnt, wasmEnt, zent{name: "l", mode: os.ModeSymlink | 0o777})): CodeSymlink,
		ptr([]byte("not a zip")): CodeNotZip,
		ptr(makeZip(zent{name: "murmur.yaml", data: "name: x\nversion: 1\nruntime: tool\n"})): CodeNoPayload,
		ptr(makeZip(zent{name: "murmur.yaml", data: "name: x\nversion: stable\n"}, wasmEnt)):  "E-MAN-005",
	} {
		_, err := l.Publish(context.Background(), *data, "")
		assertCode(t, err, code)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatal("a refused publish created the registry folder")
	}
}

func ptr[T any](v T) *T { return &v }

func TestVersions(t *testing.T) {
	l := NewLocal(t.TempDir())
	if v, err := l.Versions("echo-tool"); err != nil || v != nil {
		t.Fatalf("unknown name: %v, %v", v, err)
	}
	for _, v := range []string{"1.10.0", "1.9.0", "1.0.0-rc1", "1.0.0", "2.0.0"} {
		mustPublish(t, l, wasmArtifact("echo-tool", v, ""), "")
	}
	mustPublish(t, l, nativeArtifact("echo-tool", "3.0.0", ""), PlatformLinuxAarch64)
	// Junk: a folder without an archive (a publish that died before its zip), a file,
	// a name no version can have.
	os.MkdirAll(filepath.Join(l.Root, "echo-tool", "4.0.0"), 0o755)
	os.WriteFile(filepath.Join(l.Root, "echo-tool", "4.0.0", "echo-tool-4.0.0.sha256"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(l.Root, "echo-tool", "README"), nil, 0o644)
	os.MkdirAll(filepath.Join(l.Root, "echo-tool", ".tmp"), 0o755)
	got, err := l.Versions("echo-tool")
	want := []string{"1.0.0", "1.0.0-rc1", "1.9.0", "1.10.0", "2.0.0", "3.0.0"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Versions = %v, %v; want %v", got, err, want)
	}
	_, err = l.Versions("../x")
	assertCode(t, err, CodeArtifactName)
}

func TestNaturalLess(t *testing.T) {
	ordered := []string{"0.9", "1", "1.0", "1.0.0", "1.0.0-rc1", "1.0.0-rc2", "1.0.0-rc10", "1.2", "01.3", "1.10", "2", "10", "a", "b1", "b2"}
	for i := range ordered {
		for j := range ordered {
			if got := naturalLess(ordered[i], ordered[j]); got != (i < j) {
				t.Errorf("naturalLess(%q, %q) = %v", ordered[i], ordered[j], got)
			}
		}
	}
}

// TestPublishHammer releases many publishers at once: identical copies of one
// artifact, rival archives under one name and version, and distinct artifacts, with
// fetchers reading all along. Identical copies all succeed, exactly one rival wins,
// and a fetch never sees a half-published entry.
func TestPublishHammer(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(t.TempDir())
	const n = 8
	same := wasmArtifact("same", "1.0.0", "")
	rivals := make([][]byte, n)
	for i := range rivals {
		rivals[i] = wasmArtifact("rival", "1.0.0", fmt.Sprint(i))
	}
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		mu       sync.Mutex
		rivalWin []int
	)
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	for i := range n {
		run(func() {
			if _, err := l.Publish(ctx, same, ""); err != nil {
				t.Errorf("identical publish: %v", err)
			}
		})
		run(func() {
			_, err := l.Publish(ctx, rivals[i], "")
			if err == nil {
				mu.Lock()
				rivalWin = append(rivalWin, i)
				mu.Unlock()
			} else if errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), CodeConflict) {
				t.Errorf("rival publish: %v", err)
			}
		})
		run(func() {
			if _, err := l.Publish(ctx, wasmArtifact(fmt.Sprintf("tool-%d", i), "1.0.0", ""), ""); err != nil {
				t.Errorf("distinct publish: %v", err)
			}
		})
		run(func() {
			if _, err := l.Publish(ctx, nativeArtifact("multi", "1.0.0", fmt.Sprint(i%4)), Platforms()[i%4]); err != nil {
				t.Errorf("platform publish: %v", err)
			}
		})
		run(func() {
			for range 20 {
				b, err := l.Fetch(ctx, Ref{Name: "rival", Version: "1.0.0"})
				switch {
				case err == nil:
					if digest.Hex(b.Data) != b.SHA256 {
						t.Errorf("fetch answered bytes that do not match their hash")
					}
				case !strings.Contains(err.Error(), CodeNotFound):
					t.Errorf("fetch during publishing: %v", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	if len(rivalWin) != 1 {
		t.Fatalf("%d rival publishes succeeded, want exactly 1", len(rivalWin))
	}
	b, err := l.Fetch(ctx, Ref{Name: "rival", Version: "1.0.0"})
	if err != nil || string(b.Data) != string(rivals[rivalWin[0]]) {
		t.Fatalf("rival fetch: %v, winner %d", err, rivalWin[0])
	}
	for i := range n {
		if _, err := l.Fetch(ctx, Ref{Name: fmt.Sprintf("tool-%d", i), Version: "1.0.0"}); err != nil {
			t.Error(err)
		}
	}
	for i, p := range Platforms() {
		b, err := l.Fetch(ctx, Ref{Name: "multi", Version: "1.0.0", Platform: p})
		if err != nil || string(b.Data) != string(nativeArtifact("multi", "1.0.0", fmt.Sprint(i))) {
			t.Errorf("multi %s: %v", p, err)
		}
	}
	// Nothing but published files: no temp files left anywhere.
	filepath.WalkDir(l.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".mur.zip") && !strings.HasSuffix(p, ".sha256") && !strings.HasSuffix(p, ".meta.json") {
			t.Errorf("stray file %s", p)
		}
		return nil
	})
}

func ExampleLocal() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "registry-example")
	defer os.RemoveAll(root)

	// Pack a folder holding an artifact manifest and its payload.
	src := filepath.Join(root, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "murmur.yaml"), []byte("name: echo-tool\nversion: 1.0.0\nruntime: tool\n"), 0o644)
	os.WriteFile(filepath.Join(src, "capsule.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	data, m, err := Pack(src)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("packed", m.Name, m.Version)

	// Publish it, fetch it back, open it and install it.
	reg := NewLocal(filepath.Join(root, "registry"))
	if _, err := reg.Publish(ctx, data, ""); err != nil {
		fmt.Println(err)
		return
	}
	blob, err := reg.Fetch(ctx, Ref{Name: "echo-tool", Version: "1.0.0", Platform: HostPlatform()})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := OpenArchive(blob.Data)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("payload", a.Payload().Kind, a.Payload().Path)
	if err := a.ExtractTo(filepath.Join(root, "tools", "echo-tool")); err != nil {
		fmt.Println(err)
		return
	}
	_, err = reg.Fetch(ctx, Ref{Name: "echo-tool", Version: "2.0.0"})
	fmt.Println(errs.Code(err))
	// Output:
	// packed echo-tool 1.0.0
	// payload wasm capsule.wasm
	// E-REG-031
}
