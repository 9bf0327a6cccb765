package guestfs

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestProtect: a protected file stays as it is whatever the guest tries, by its name, a
// hard link or a symbolic link; everything else stays writable.
func TestProtect(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "MURMUR.md")
	if err := os.WriteFile(p, []byte("identity"), 0o444); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, Protect("MURMUR.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if errno := s.Link("MURMUR.md", "hard"); errno != 0 {
		t.Fatalf("link: %v", errno)
	}
	if errno := s.Symlink("MURMUR.md", "soft"); errno != 0 {
		t.Fatalf("symlink: %v", errno)
	}
	tests := []struct {
		name string
		op   func() experimentalsys.Errno
	}{
		{"open for writing", func() experimentalsys.Errno { _, e := s.OpenFile("MURMUR.md", experimentalsys.O_WRONLY, 0); return e }},
		{"truncate at open, read-only", func() experimentalsys.Errno {
			_, e := s.OpenFile("MURMUR.md", experimentalsys.O_RDONLY|experimentalsys.O_TRUNC, 0)
			return e
		}},
		{"append", func() experimentalsys.Errno {
			_, e := s.OpenFile("MURMUR.md", experimentalsys.O_RDONLY|experimentalsys.O_APPEND, 0)
			return e
		}},
		{"through the hard link", func() experimentalsys.Errno { _, e := s.OpenFile("hard", experimentalsys.O_RDWR, 0); return e }},
		{"through the symlink", func() experimentalsys.Errno { _, e := s.OpenFile("soft", experimentalsys.O_RDWR, 0); return e }},
		{"chmod", func() experimentalsys.Errno { return s.Chmod("MURMUR.md", 0o666) }},
		{"utimens", func() experimentalsys.Errno { return s.Utimens("soft", 1, 1) }},
		{"unlink", func() experimentalsys.Errno { return s.Unlink("MURMUR.md") }},
		{"unlink the hard link", func() experimentalsys.Errno { return s.Unlink("hard") }},
		{"rename away", func() experimentalsys.Errno { return s.Rename("MURMUR.md", "gone") }},
		{"rename over", func() experimentalsys.Errno {
			f, _ := s.OpenFile("fake", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
			f.Close()
			return s.Rename("fake", "MURMUR.md")
		}},
		{"utimens on a read-only handle", func() experimentalsys.Errno {
			f, e := s.OpenFile("MURMUR.md", experimentalsys.O_RDONLY, 0)
			if e != 0 {
				return e
			}
			defer f.Close()
			return f.Utimens(1, 1)
		}},
	}
	for _, tt := range tests {
		if errno := tt.op(); errno != experimentalsys.EROFS {
			t.Errorf("%s: errno %v, want EROFS", tt.name, errno)
		}
	}
	if got, _ := os.ReadFile(p); string(got) != "identity" {
		t.Fatalf("protected file changed: %q", got)
	}
	f, errno := s.OpenFile("MURMUR.md", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("reading: %v", errno)
	}
	f.Close()
	if f, errno := s.OpenFile("other.txt", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644); errno != 0 {
		t.Fatalf("other files must stay writable: %v", errno)
	} else {
		f.Close()
	}
	// A name that does not exist yet is protected once the host makes it, before the
	// guest's first reach of the folder (Before), as runtime makes MURMUR.md.
	late, err := New(dir, Protect("late.md"), Before(func() error { return os.WriteFile(filepath.Join(dir, "late.md"), []byte("host"), 0o444) }))
	if err != nil {
		t.Fatalf("protecting a name that does not exist yet: %v", err)
	}
	defer late.Close()
	if _, errno := late.OpenFile("late.md", experimentalsys.O_CREAT|experimentalsys.O_WRONLY|experimentalsys.O_TRUNC, 0o644); errno != experimentalsys.EROFS {
		t.Errorf("the guest's create over the host's late.md: errno %v, want EROFS", errno)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "late.md")); string(got) != "host" {
		t.Errorf("late.md = %q, want the host's", got)
	}
}

// TestProtectFollowsReplacement: the host replaces a protected file by renaming a new one
// over it (as MURMUR.md is rewritten when the capsule's URL changes). The new file is
// protected, and the old one, still reachable under another name, is not: a file that
// reuses the replaced file's inode must never read as protected.
func TestProtectFollowsReplacement(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "MURMUR.md")
	if err := os.WriteFile(p, []byte("first"), 0o444); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, Protect("MURMUR.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Link(p, filepath.Join(dir, "old")); err != nil { // the host keeps the old one
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".MURMUR.md.tmp")
	if err := os.WriteFile(tmp, []byte("second"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if _, errno := s.OpenFile("MURMUR.md", experimentalsys.O_WRONLY, 0); errno != experimentalsys.EROFS {
		t.Errorf("the replacement: errno %v, want EROFS", errno)
	}
	os.Chmod(filepath.Join(dir, "old"), 0o644)
	f, errno := s.OpenFile("old", experimentalsys.O_WRONLY|experimentalsys.O_APPEND, 0)
	if errno != 0 {
		t.Fatalf("the replaced file is still protected: %v", errno)
	}
	f.Close()
}
