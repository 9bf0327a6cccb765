package registry

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// artifactSpec describes an artifact folder to pack.
type artifactSpec struct {
	name, version, runtime, impl string
	payload                      []byte // skill text, wasm bytes or native binary
}

func writeArtifactDir(t testing.TB, s artifactSpec) string {
	t.Helper()
	dir := filepath.Join(tempDir(t), s.name+"-"+s.version)
	must(t, os.MkdirAll(dir, 0o755))
	y := fmt.Sprintf("name: %s\nversion: %q\nruntime: %s\n", s.name, s.version, s.runtime)
	if s.impl != "" {
		y += "implementation: " + s.impl + "\n"
	}
	must(t, os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(y), 0o644))
	switch {
	case s.runtime == "skill":
		must(t, os.WriteFile(filepath.Join(dir, "skill.md"), s.payload, 0o644))
	case s.impl == "native":
		must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "bin", s.name), s.payload, 0o755))
	default:
		must(t, os.WriteFile(filepath.Join(dir, s.name+".wasm"), s.payload, 0o644))
	}
	return dir
}

func tempDir(t testing.TB) string {
	if tt, ok := t.(*testing.T); ok {
		return tt.TempDir()
	}
	return t.(*testing.B).TempDir()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func publish(t testing.TB, reg *Local, s artifactSpec, platform string) *Blob {
	t.Helper()
	data, _, err := Pack(writeArtifactDir(t, s))
	must(t, err)
	b, err := reg.Publish(context.Background(), data, platform)
	must(t, err)
	return b
}

var wasmHeader = []byte("\x00asm\x01\x00\x00\x00")

// fixture is a registry with a wasm tool, a skill and a capsule manifest naming both.
type fixture struct {
	reg      *Local
	dir      string // the capsule's folder
	manifest string
}

func newFixture(t *testing.T, manifestExtra string) *fixture {
	t.Helper()
	reg := NewLocal(filepath.Join(t.TempDir(), "registry"))
	publish(t, reg, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)}, "")
	publish(t, reg, artifactSpec{"echo", "1.1.0", "tool", "", append(wasmHeader, "echo 1.1"...)}, "")
	publish(t, reg, artifactSpec{"greeting", "1.0.0", "skill", "", []byte("# Greet\n")}, "")
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "skills", "tone"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "skills", "tone", "SKILL.md"), []byte("be brief"), 0o644))
	f := &fixture{reg: reg, dir: dir, manifest: filepath.Join(dir, "murmur.yaml")}
	f.writeManifest(t, "1.0.0", manifestExtra)
	return f
}

func (f *fixture) writeManifest(t *testing.T, echoVersion, extra string) {
	t.Helper()
	y := fmt.Sprintf("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: echo, version: %q}\n  - {name: greeting, version: 1.0.0, runtime: skill}\n  - {name: tone, runtime: skill, source: skills/tone}\n%s", echoVersion, extra)
	must(t, os.WriteFile(f.manifest, []byte(y), 0o644))
}

func (f *fixture) load(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(f.manifest)
	must(t, err)
	return m
}

func (f *fixture) install(t *testing.T) (*Resolution, bool, error) {
	return InstallLock(context.Background(), f.load(t), Options{Registry: f.reg, Platform: PlatformLinuxX86_64})
}

func (f *fixture) verify(t *testing.T, platform string) (*Resolution, error) {
	return VerifyLock(context.Background(), f.load(t), Options{Registry: f.reg, Platform: platform})
}

// snapshot lists every file under the given roots with its content, to prove nothing was written.
func snapshot(t *testing.T, roots ...string) string {
	t.Helper()
	var lines []string
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			must(t, err)
			if !d.IsDir() {
				data, err := os.ReadFile(p)
				must(t, err)
				lines = append(lines, p+"\x00"+string(data))
			} else {
				lines = append(lines, p+"/")
			}
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestInstallThenVerify(t *testing.T) {
	f := newFixture(t, "")
	res, changed, err := f.install(t)
	must(t, err)
	if !changed || len(res.Artifacts) != 3 || len(res.Lock.Artifacts) != 2 {
		t.Fatalf("changed=%v artifacts=%d lock=%d", changed, len(res.Artifacts), len(res.Lock.Artifacts))
	}
	lock, err := ReadLock(filepath.Join(f.dir, LockFileName))
	must(t, err)
	if e := lock.Entry("echo"); e == nil || e.ResolvedVersion != "1.0.0" || e.SHA256.Any != res.Artifacts[0].SHA256 {
		t.Fatalf("echo entry = %+v", e)
	}
	if lock.Entry("tone") != nil {
		t.Fatal("a local skill was locked")
	}
	tone := res.Artifacts[2]
	if tone.Source == "" || string(tone.Text) != "be brief" {
		t.Fatalf("tone = %+v", tone)
	}
	// A second install with nothing changed leaves the file alone.
	before := snapshot(t, f.dir)
	if _, changed, err := f.install(t); err != nil || changed {
		t.Fatalf("second install: changed=%v err=%v", changed, err)
	}
	if snapshot(t, f.dir) != before {
		t.Fatal("an unchanged install rewrote files")
	}
	if _, err := f.verify(t, PlatformLinuxX86_64); err != nil {
		t.Fatal(err)
	}
	// Bumping the version in the manifest: verify refuses, install re-pins.
	f.writeManifest(t, "1.1.0", "")
	if _, err := f.verify(t, PlatformLinuxX86_64); errs.Code(err) != CodeLockVersionPin {
		t.Fatalf("verify after bump: %v", err)
	}
	if _, changed, err := f.install(t); err != nil || !changed {
		t.Fatalf("install after bump: changed=%v err=%v", changed, err)
	}
	if _, err := f.verify(t, PlatformLinuxX86_64); err != nil {
		t.Fatal(err)
	}
}

// TestLockRefusals: each refusal of docs/reference/lock.md "Verifying" carries its code,
// names the artifact and both values, and writes nothing.
func TestLockRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, f *fixture)
		code   string
		says   []string
	}{
		{"missing entry", func(t *testing.T, f *fixture) {
			f.writeManifest(t, "1.0.0", "")
			rewriteLock(t, f, func(l *Lock) { l.Artifacts = l.Artifacts[1:] }) // drop echo
		}, CodeLockMissing, []string{"echo", "1.0.0", "install", "murmur.yaml:4:"}},
		{"version mismatch", func(t *testing.T, f *fixture) {
			f.writeManifest(t, "1.1.0", "")
		}, CodeLockVersionPin, []string{"echo", "1.1.0", "1.0.0", "murmur.lock:5:"}},
		{"sha256 mismatch", func(t *testing.T, f *fixture) {
			rewriteLock(t, f, func(l *Lock) { l.Entry("echo").SHA256.Any = strings.Repeat("0", 64) })
		}, CodeLockHash, []string{"echo@1.0.0", strings.Repeat("0", 64), "hash to", "murmur.lock:7:12"}},
		{"registry copy replaced with its .sha256", func(t *testing.T, f *fixture) {
			replacePublished(t, f, "echo", "1.0.0", append(wasmHeader, "evil"...), true)
		}, CodeLockHash, []string{"echo@1.0.0", "lock pins"}},
		{"registry copy altered", func(t *testing.T, f *fixture) {
			replacePublished(t, f, "echo", "1.0.0", append(wasmHeader, "evil"...), false)
		}, CodeHashMismatch, []string{"echo"}},
		{"lock_version 1", func(t *testing.T, f *fixture) {
			must(t, os.WriteFile(filepath.Join(f.dir, LockFileName), []byte("lock_version: 1\nartifacts: []\n"), 0o644))
		}, CodeLockV1, []string{"lock_version 1", "install"}},
		{"no lock", func(t *testing.T, f *fixture) {
			must(t, os.Remove(filepath.Join(f.dir, LockFileName)))
		}, CodeLockFileMissing, []string{"install"}},
		{"missing local skill", func(t *testing.T, f *fixture) {
			must(t, os.RemoveAll(filepath.Join(f.dir, "skills")))
		}, manifest.CodeSourceMissing, []string{"tone", "murmur.yaml:6:"}},
		{"archive is another artifact", func(t *testing.T, f *fixture) {
			data, _, err := Pack(writeArtifactDir(t, artifactSpec{"other", "1.0.0", "tool", "", wasmHeader}))
			must(t, err)
			replacePublished(t, f, "echo", "1.0.0", data, true)
			rewriteLock(t, f, func(l *Lock) { l.Entry("echo").SHA256.Any = digest.Hex(data) })
		}, CodeIdentity, []string{"echo@1.0.0", "other@1.0.0"}},
		{"archive has another role", func(t *testing.T, f *fixture) {
			f.writeManifest(t, "1.0.0", "inference: {driver: {artifact: echo}, model: m}\n")
			y, _ := os.ReadFile(f.manifest)
			must(t, os.WriteFile(f.manifest, []byte(strings.Replace(string(y), `{name: echo, version: "1.0.0"}`, `{name: echo, version: "1.0.0", runtime: driver}`, 1)), 0o644))
		}, CodeRole, []string{"echo@1.0.0", "tool", "driver"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			if _, _, err := f.install(t); err != nil {
				t.Fatal(err)
			}
			tt.mutate(t, f)
			before := snapshot(t, f.dir, f.reg.Root)
			_, err := f.verify(t, PlatformLinuxX86_64)
			if e := errs.Find(err, tt.code); e == nil {
				t.Fatalf("want %s, got %v", tt.code, err)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
			if !strings.Contains(err.Error(), "fix:") {
				t.Errorf("no fix: %v", err)
			}
			if snapshot(t, f.dir, f.reg.Root) != before {
				t.Fatal("verify wrote something")
			}
		})
	}
}

// TestInstallRefusesChangedBytes: a pinned version whose registry bytes changed is not
// silently re-pinned.
func TestInstallRefusesChangedBytes(t *testing.T) {
	f := newFixture(t, "")
	_, _, err := f.install(t)
	must(t, err)
	replacePublished(t, f, "echo", "1.0.0", append(wasmHeader, "changed"...), true)
	before := snapshot(t, f.dir)
	if _, _, err := f.install(t); errs.Code(err) != CodeLockHash {
		t.Fatalf("want %s, got %v", CodeLockHash, err)
	}
	if snapshot(t, f.dir) != before {
		t.Fatal("a refused install wrote the lock")
	}
}

func TestNativePlatformPins(t *testing.T) {
	reg := NewLocal(filepath.Join(t.TempDir(), "registry"))
	publish(t, reg, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("\x7fELF amd64")}, PlatformLinuxX86_64)
	publish(t, reg, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("\x7fELF arm64")}, PlatformLinuxAarch64)
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	must(t, os.WriteFile(mpath, []byte("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: git-helper, version: 0.3.1}\n"), 0o644))
	m, err := manifest.Load(mpath)
	must(t, err)
	ctx := context.Background()
	install := func(p string) error {
		_, _, err := InstallLock(ctx, m, Options{Registry: reg, Platform: p})
		return err
	}
	verify := func(p string) error {
		_, err := VerifyLock(ctx, m, Options{Registry: reg, Platform: p})
		return err
	}
	must(t, install(PlatformLinuxX86_64))
	must(t, verify(PlatformLinuxX86_64))
	if err := verify(PlatformLinuxAarch64); errs.Code(err) != CodeLockPlatform || !strings.Contains(err.Error(), "git-helper") {
		t.Fatalf("verify on an unpinned platform: %v", err)
	}
	must(t, install(PlatformLinuxAarch64))
	lock, err := ReadLock(LockPath(mpath))
	must(t, err)
	if p := lock.Entry("git-helper").SHA256.Platforms; len(p) != 2 || p[PlatformLinuxX86_64] == p[PlatformLinuxAarch64] {
		t.Fatalf("platform pins = %v", p)
	}
	must(t, verify(PlatformLinuxX86_64))
	must(t, verify(PlatformLinuxAarch64))
	if err := verify(PlatformDarwinAarch64); errs.Code(err) == "" {
		t.Fatalf("verify on a platform the registry lacks: %v", err)
	}
}

// TestConcurrentInstalls: installs of different manifests sharing one murmur.lock, all
// released together, leave exactly one install's complete lock — never torn or mixed.
func TestConcurrentInstalls(t *testing.T) {
	reg := NewLocal(filepath.Join(t.TempDir(), "registry"))
	const n = 8
	for i := 0; i < n; i++ {
		publish(t, reg, artifactSpec{"tool-a", fmt.Sprintf("1.%d.0", i), "tool", "", append(wasmHeader, byte(i))}, "")
		publish(t, reg, artifactSpec{"tool-b", fmt.Sprintf("2.%d.0", i), "skill", "", []byte{'b', byte(i)}}, "")
	}
	dir := t.TempDir()
	want := map[string]bool{}
	ms := make([]*manifest.Manifest, n)
	for i := range ms {
		p := filepath.Join(dir, fmt.Sprintf("m%d.yaml", i))
		must(t, os.WriteFile(p, []byte(fmt.Sprintf("name: cap\nversion: 1.0.0\nartifacts:\n  - {name: tool-a, version: 1.%d.0}\n  - {name: tool-b, version: 2.%d.0, runtime: skill}\n", i, i)), 0o644))
		m, err := manifest.Load(p)
		must(t, err)
		ms[i] = m
		res, err := Resolve(context.Background(), m, Options{Registry: reg, Mode: Install})
		must(t, err)
		want[string(res.Lock.Marshal())] = true
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for round := 0; round < 3; round++ {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(m *manifest.Manifest) {
				defer wg.Done()
				<-start
				if _, _, err := InstallLock(context.Background(), m, Options{Registry: reg}); err != nil {
					t.Error(err)
				}
			}(ms[i])
		}
	}
	close(start)
	wg.Wait()
	got, err := os.ReadFile(filepath.Join(dir, LockFileName))
	must(t, err)
	if !want[string(got)] {
		t.Fatalf("final lock is not any one install's lock:\n%s", got)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".murmur.lock*")); len(entries) > 0 {
		t.Fatalf("temp files left: %v", entries)
	}
}

func rewriteLock(t *testing.T, f *fixture, edit func(*Lock)) {
	t.Helper()
	p := filepath.Join(f.dir, LockFileName)
	l, err := ReadLock(p)
	must(t, err)
	edit(l)
	must(t, WriteLock(p, l))
}

// replacePublished overwrites a published archive in place (as an attacker with write
// access to the registry folder would), optionally updating its .sha256 to match.
func replacePublished(t *testing.T, f *fixture, name, version string, payload []byte, fixHash bool) {
	t.Helper()
	data := payload
	if _, err := OpenArchive(payload); err != nil {
		d, _, err := Pack(writeArtifactDir(t, artifactSpec{name, version, "tool", "", payload}))
		must(t, err)
		data = d
	}
	base := filepath.Join(f.reg.Root, name, version, name+"-"+version)
	must(t, os.WriteFile(base+".mur.zip", data, 0o644))
	if fixHash {
		must(t, os.WriteFile(base+".sha256", []byte(digest.Hex(data)+"\n"), 0o644))
	}
}

// BenchmarkVerify20MiB verifies a capsule whose four registry artifacts total 20 MiB:
// read, sha256 against registry and lock, and open every archive with all its checks.
func BenchmarkVerify20MiB(b *testing.B) {
	reg := NewLocal(filepath.Join(b.TempDir(), "registry"))
	dir := b.TempDir()
	y := "name: cap\nversion: 1.0.0\nartifacts:\n"
	total := 0
	for i := 0; i < 4; i++ {
		payload := make([]byte, 5<<20)
		rand.Read(payload) // incompressible, so the archive is the full 5 MiB
		copy(payload, wasmHeader)
		blob := publish(b, reg, artifactSpec{fmt.Sprintf("tool-%d", i), "1.0.0", "tool", "", payload}, "")
		total += len(blob.Data)
		y += fmt.Sprintf("  - {name: tool-%d, version: 1.0.0}\n", i)
	}
	mpath := filepath.Join(dir, "murmur.yaml")
	must(b, os.WriteFile(mpath, []byte(y), 0o644))
	m, err := manifest.Load(mpath)
	must(b, err)
	ctx := context.Background()
	if _, _, err := InstallLock(ctx, m, Options{Registry: reg}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := VerifyLock(ctx, m, Options{Registry: reg}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestArchiveCache(t *testing.T) {
	c := newArchiveCache(2)
	var datas [][]byte
	for i := 0; i < 3; i++ {
		d, _, err := Pack(writeArtifactDir(t, artifactSpec{fmt.Sprintf("t%d", i), "1.0.0", "tool", "", append(wasmHeader, byte(i))}))
		must(t, err)
		datas = append(datas, d)
	}
	a0, err := c.open(datas[0], digest.Hex(datas[0]))
	must(t, err)
	if again, _ := c.open(datas[0], digest.Hex(datas[0])); again != a0 {
		t.Fatal("a second open of the same bytes did not hit the cache")
	}
	c.open(datas[1], digest.Hex(datas[1]))
	c.open(datas[2], digest.Hex(datas[2])) // evicts datas[0], the least recently used
	if len(c.arcs) != 2 || c.arcs[digest.Hex(datas[0])] != nil {
		t.Fatalf("cache holds %d entries", len(c.arcs))
	}
	if _, err := c.open([]byte("not a zip"), "x"); err == nil || len(c.arcs) != 2 {
		t.Fatalf("a refusal was cached or not returned: %v", err)
	}
}
