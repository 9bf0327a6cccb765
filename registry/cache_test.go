package registry

import (
	"context"
	"errors"
	"fmt"
	"github.com/capsulegate/capsulegate/internal/digest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func blobOf(i, size int) ([]byte, string) {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("artifact %d ", i))
	return b, digest.Hex(b)
}

// TestCacheBound puts 200 distinct artifacts of mixed sizes into a small cache: it never
// holds more than its bound, and what a staged capsule holds is never evicted.
func TestCacheBound(t *testing.T) {
	const max = 64 << 10
	c, err := OpenCache(t.TempDir(), max)
	must(t, err)
	var held []string
	for i := range 3 {
		data, sum := blobOf(1000+i, 4<<10)
		if ok, err := c.Put(sum, data); err != nil || !ok {
			t.Fatalf("put held %d: %v %v", i, ok, err)
		}
		held = append(held, sum)
	}
	release, err := c.Hold(held)
	must(t, err)
	kept := 0
	for i := range 200 {
		data, sum := blobOf(i, 1<<10+(i*397)%(9<<10))
		ok, err := c.Put(sum, data)
		must(t, err)
		if ok {
			kept++
		}
		used, _, err := c.Usage()
		must(t, err)
		if used > max {
			t.Fatalf("after %d puts the cache holds %d bytes, over its bound %d", i+1, used, max)
		}
		for _, s := range held {
			if !c.Has(s) {
				t.Fatalf("after %d puts a held entry %s was evicted", i+1, s)
			}
		}
	}
	if kept != 200 {
		t.Fatalf("kept %d of 200 entries, each well under the bound", kept)
	}
	// An entry that fits only by evicting held ones is not kept.
	big, sum := blobOf(5000, max-4<<10)
	if ok, err := c.Put(sum, big); err != nil || ok {
		t.Fatalf("an entry needing held space: kept=%v err=%v", ok, err)
	}
	// Larger than the bound: never kept.
	huge, hsum := blobOf(5001, max+1)
	if ok, err := c.Put(hsum, huge); err != nil || ok {
		t.Fatalf("an entry over the bound: kept=%v err=%v", ok, err)
	}
	release()
	if ok, err := c.Put(sum, big); err != nil || !ok {
		t.Fatalf("once released, held space is evictable: kept=%v err=%v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "pins", strconv.Itoa(os.Getpid()))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the pin file outlived the last hold: %v", err)
	}
}

// TestCacheLRU evicts the entry used least recently, and Get counts as a use.
func TestCacheLRU(t *testing.T) {
	c, err := OpenCache(t.TempDir(), 3<<10)
	must(t, err)
	var sums []string
	for i := range 3 {
		data, sum := blobOf(i, 1<<10)
		_, err := c.Put(sum, data)
		must(t, err)
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		must(t, os.Chtimes(c.path(sum), old, old))
		sums = append(sums, sum)
	}
	if _, ok := c.Get(sums[0]); !ok { // the oldest, now the newest
		t.Fatal("miss on a cached entry")
	}
	data, sum := blobOf(9, 1<<10)
	_, err = c.Put(sum, data)
	must(t, err)
	want := map[string]bool{sums[0]: true, sums[1]: false, sums[2]: true, sum: true}
	for s, in := range want {
		if c.Has(s) != in {
			t.Errorf("entry %s… present=%v, want %v", s[:8], !in, in)
		}
	}
}

// TestCacheDropsDamaged: an entry whose bytes changed on disk is a miss, and is removed.
func TestCacheDropsDamaged(t *testing.T) {
	c, err := OpenCache(t.TempDir(), 0)
	must(t, err)
	data, sum := blobOf(1, 100)
	_, err = c.Put(sum, data)
	must(t, err)
	must(t, os.WriteFile(c.path(sum), append(data, 'x'), 0o644))
	if _, ok := c.Get(sum); ok {
		t.Fatal("a damaged entry was served")
	}
	if c.Has(sum) {
		t.Fatal("a damaged entry was kept")
	}
	if _, err := c.Put(sum, append(data, 'x')); err == nil {
		t.Fatal("Put took bytes that do not hash to their name")
	}
}

// TestCachePinsAcrossProcesses: another live process's pins keep its entries; a dead
// one's pin file is dropped with its hold.
func TestCachePinsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 2<<10)
	must(t, err)
	live := exec.Command("sleep", "60")
	must(t, live.Start())
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	dead := exec.Command("true")
	must(t, dead.Run())
	a, asum := blobOf(1, 1<<10)
	b, bsum := blobOf(2, 1<<10)
	for _, e := range []struct {
		data []byte
		sum  string
	}{{a, asum}, {b, bsum}} {
		_, err := c.Put(e.sum, e.data)
		must(t, err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "pins", strconv.Itoa(live.Process.Pid)), []byte(asum+"\n"), 0o644))
	deadPins := filepath.Join(dir, "pins", strconv.Itoa(dead.Process.Pid))
	must(t, os.WriteFile(deadPins, []byte(bsum+"\n"), 0o644))
	d, dsum := blobOf(3, 1<<10)
	ok, err := c.Put(dsum, d)
	must(t, err)
	if !ok || !c.Has(asum) || c.Has(bsum) {
		t.Fatalf("kept=%v live-held=%v dead-held=%v: want true, true, false", ok, c.Has(asum), c.Has(bsum))
	}
	if _, err := os.Stat(deadPins); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dead process's pin file was kept: %v", err)
	}
}

// flaky is a registry that can be taken down, counting its fetches.
type flaky struct {
	Registry
	down    atomic.Bool
	fetches atomic.Int32
	cache   *Cache
}

func (f *flaky) Cache() *Cache { return f.cache }

func (f *flaky) Fetch(ctx context.Context, ref Ref) (*Blob, error) {
	f.fetches.Add(1)
	if f.down.Load() {
		return nil, refuse(CodeRemoteDown, "registry is down", "bring it up")
	}
	return f.Registry.Fetch(ctx, ref)
}

// TestResolveFromCache: what the lock pins stages from the cache with the registry
// down; bytes that differ from the lock are refused and never kept.
func TestResolveFromCache(t *testing.T) {
	f := newFixture(t, "")
	c, err := OpenCache(t.TempDir(), 0)
	must(t, err)
	reg := &flaky{Registry: f.reg, cache: c}
	opts := Options{Registry: reg, Platform: PlatformLinuxX86_64}
	res, _, err := InstallLock(context.Background(), f.load(t), opts)
	must(t, err)
	for _, a := range res.Artifacts {
		if a.Version != "" && !c.Has(a.SHA256) {
			t.Fatalf("installed %s was not cached", a.Name)
		}
	}
	reg.down.Store(true)
	before := reg.fetches.Load()
	res2, err := VerifyLock(context.Background(), f.load(t), opts)
	must(t, err)
	if n := reg.fetches.Load() - before; n != 0 {
		t.Fatalf("verify with every pin cached fetched %d times", n)
	}
	if len(res2.Artifacts) != len(res.Artifacts) || res2.Artifacts[0].SHA256 != res.Artifacts[0].SHA256 || res2.Artifacts[0].Archive == nil {
		t.Fatalf("from the cache: %+v", res2.Artifacts)
	}

	// A damaged entry is fetched again; with the registry down that is the registry's error.
	echo := res.Artifacts[0].SHA256
	must(t, os.WriteFile(c.path(echo), []byte("not it"), 0o644))
	if _, err := VerifyLock(context.Background(), f.load(t), opts); !hasCode(err, CodeRemoteDown) {
		t.Fatalf("damaged cache, registry down: %v", err)
	}

	// The registry now serves other bytes under the pinned version: refused, not kept.
	reg.down.Store(false)
	vdir := filepath.Join(f.reg.Root, "echo", "1.0.0")
	other, _, err := Pack(writeArtifactDir(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "tampered"...)}))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(vdir, "echo-1.0.0.mur.zip"), other, 0o644))
	must(t, os.WriteFile(filepath.Join(vdir, "echo-1.0.0.sha256"), []byte(digest.Hex(other)+"  echo-1.0.0.mur.zip\n"), 0o644))
	_, err = VerifyLock(context.Background(), f.load(t), opts)
	if !hasCode(err, CodeLockHash) {
		t.Fatalf("changed registry bytes: %v", err)
	}
	if c.Has(digest.Hex(other)) || c.Has(echo) {
		t.Fatal("bytes refused by the lock were cached")
	}
}

func hasCode(err error, code string) bool {
	for _, e := range asErrList(err) {
		if e.Code == code {
			return true
		}
	}
	return false
}

// TestResolveWarnsWhenTheCacheCannotKeep: a cache that cannot write does not refuse the
// stage; it is a warning naming the artifact.
func TestResolveWarnsWhenTheCacheCannotKeep(t *testing.T) {
	f := newFixture(t, "")
	c, err := OpenCache(t.TempDir(), 0)
	must(t, err)
	must(t, os.RemoveAll(c.blobDir()))
	must(t, os.WriteFile(c.blobDir(), []byte("not a folder"), 0o644))
	res, _, err := InstallLock(context.Background(), f.load(t), Options{Registry: &flaky{Registry: f.reg, cache: c}, Platform: PlatformLinuxX86_64})
	must(t, err)
	if len(res.Warnings) != 2 || res.Warnings[0].Code != WarnCache || !strings.Contains(res.Warnings[0].Msg, "echo@1.0.0") {
		t.Fatalf("warnings %v", res.Warnings)
	}
}
