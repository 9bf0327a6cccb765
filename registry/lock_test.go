package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

var (
	hashA = strings.Repeat("a", 64)
	hashB = strings.Repeat("b", 64)
)

func TestParseLock(t *testing.T) {
	tests := []struct {
		name, src, code, at string
	}{
		{"valid any", "lock_version: 2\nartifacts:\n  - name: echo\n    resolved_version: \"1.0.0\"\n    sha256: {any: " + hashA + "}\n", "", ""},
		{"valid platforms", "lock_version: 2\nartifacts:\n  - name: git-helper\n    resolved_version: 0.3.1\n    sha256:\n      platforms:\n        linux-x86_64: " + hashA + "\n", "", ""},
		{"empty", "lock_version: 2\nartifacts: []\n", "", ""},
		{"version 1", "lock_version: 1\nartifacts:\n  - name: echo\n    version: 1.0.0\n    sha256: abc\n", CodeLockV1, "murmur.lock"},
		{"version 3", "lock_version: 3\n", CodeLockVersion, "murmur.lock"},
		{"version missing", "artifacts: []\n", CodeLockMalformed, "murmur.lock"},
		{"not yaml", "lock_version: [\n", CodeLockMalformed, "murmur.lock:1"},
		{"wrong type", "lock_version: 2\nartifacts: {}\n", CodeLockMalformed, "murmur.lock:2:12"},
		{"unknown key", "lock_version: 2\nextra: 1\n", CodeLockMalformed, "murmur.lock:2:1"},
		{"missing hash", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1'}\n", CodeLockMalformed, "murmur.lock:3:5"},
		{"short hash", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1', sha256: {any: abc}}\n", CodeLockEntry, "murmur.lock:3:55"},
		{"upper hash", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1', sha256: {any: " + strings.ToUpper(hashA) + "}}\n", CodeLockEntry, "murmur.lock:3:55"},
		{"both hashes", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1', sha256: {any: " + hashA + ", platforms: {linux-x86_64: " + hashA + "}}}\n", CodeLockEntry, "murmur.lock:3:49"},
		{"bad platform", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1', sha256: {platforms: {plan9-mips: " + hashA + "}}}\n", CodeLockEntry, "murmur.lock:3:74"},
		{"duplicate", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: '1', sha256: {any: " + hashA + "}}\n  - {name: echo, resolved_version: '2', sha256: {any: " + hashB + "}}\n", CodeLockEntry, "murmur.lock:4:12"},
		{"bad name", "lock_version: 2\nartifacts:\n  - {name: Echo, resolved_version: '1', sha256: {any: " + hashA + "}}\n", CodeLockEntry, "murmur.lock:3:12"},
		{"reserved version", "lock_version: 2\nartifacts:\n  - {name: echo, resolved_version: latest, sha256: {any: " + hashA + "}}\n", CodeLockEntry, "murmur.lock:3:36"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLock([]byte(tt.src), "murmur.lock")
			if got := errs.Code(err); got != tt.code {
				t.Fatalf("code %q, want %q: %v", got, tt.code, err)
			}
			if err != nil && !strings.Contains(err.Error(), "fix:") {
				t.Errorf("no fix in %v", err)
			}
			if e := errs.Find(err, tt.code); err != nil && e.Pos != tt.at {
				t.Errorf("position %q, want %q", e.Pos, tt.at)
			}
		})
	}
}

func TestLockRoundTrip(t *testing.T) {
	l := &Lock{LockVersion: LockVersion, Artifacts: []LockEntry{
		{Name: "zeta", ResolvedVersion: "2.0", SHA256: LockHashes{Platforms: map[string]string{PlatformLinuxAarch64: hashB, PlatformLinuxX86_64: hashA}}},
		{Name: "alpha", ResolvedVersion: "1.0.0", SHA256: LockHashes{Any: hashA}},
	}}
	path := filepath.Join(t.TempDir(), LockFileName)
	if err := WriteLock(path, l); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Marshal()) != string(l.Marshal()) {
		t.Fatalf("round trip changed the lock:\n%s\n---\n%s", got.Marshal(), l.Marshal())
	}
	if got.Artifacts[0].Name != "alpha" {
		t.Errorf("entries not sorted: %v", got.Artifacts)
	}
	if sum, specific := got.Entry("zeta").Pin(PlatformLinuxX86_64); sum != hashA || !specific {
		t.Errorf("pin = %s %v", sum, specific)
	}
	if _, err := ReadLock(filepath.Join(t.TempDir(), "none")); errs.Code(err) != CodeLockFileMissing || !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Errorf("missing lock: %v", err)
	}
}

func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// FuzzParseLock checks that no input panics the lock parser and that an accepted lock
// survives a marshal round trip unchanged.
func FuzzParseLock(f *testing.F) {
	f.Add([]byte("lock_version: 2\nartifacts:\n  - name: echo\n    resolved_version: \"1.0.0\"\n    sha256: {any: " + hashA + "}\n"))
	f.Add([]byte("lock_version: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock(data, "f.lock")
		if err != nil {
			if errs.Code(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		again, err := ParseLock(l.Marshal(), "again.lock")
		if err != nil {
			t.Fatalf("marshalled lock does not parse: %v\n%s", err, l.Marshal())
		}
		if string(again.Marshal()) != string(l.Marshal()) {
			t.Fatalf("round trip differs")
		}
	})
}
