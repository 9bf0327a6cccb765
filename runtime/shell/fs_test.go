//go:build linux

package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesystemConfinement: only the workdir is writable, and nothing outside it that
// is not a system folder is readable, whichever way the path is spelled.
func TestFilesystemConfinement(t *testing.T) {
	for _, tier := range tiers(t) {
		t.Run(tier, func(t *testing.T) {
			work := t.TempDir()
			home := t.TempDir() // a user's home beside the workdir, as on a real host
			outside := t.TempDir()
			const secret = "SENTINEL-PRIVATE-KEY-7f3a"
			writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), secret)
			writeFile(t, filepath.Join(outside, "existing.txt"), "original")
			writeFile(t, filepath.Join(outside, "other.txt"), secret)
			writeFile(t, filepath.Join(outside, "linked.txt"), "linked-original")
			// Planted by someone with access to the workdir on the host: a symlink out,
			// a symlink to a folder, and a hardlink (same filesystem: all under TMPDIR).
			if err := os.Symlink(filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(work, "key-link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(work, "ssh-dir")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "existing.txt"), filepath.Join(work, "write-link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(outside, "linked.txt"), filepath.Join(work, "planted-hardlink")); err != nil {
				t.Fatal(err)
			}
			s := newSandbox(t, Config{Workdir: work, tier: tier})

			refused := map[string]string{
				"shadow":              "cat /etc/shadow",
				"home key":            "cat " + filepath.Join(home, ".ssh", "id_ed25519"),
				"home listing":        "ls " + home,
				"proc root":           "cat /proc/self/root/etc/shadow",
				"proc root key":       "cat /proc/self/root" + filepath.Join(home, ".ssh", "id_ed25519"),
				"symlink read":        "cat key-link",
				"symlink dir":         "cat ssh-dir/id_ed25519",
				"symlink write":       "echo pwned > write-link",
				"write outside":       "echo pwned > " + filepath.Join(outside, "new.txt"),
				"append outside":      "echo pwned >> " + filepath.Join(outside, "existing.txt"),
				"mkdir outside":       "mkdir " + filepath.Join(outside, "d"),
				"write system":        "echo pwned > /usr/pwned",
				"write etc":           "echo pwned >> /etc/hosts",
				"tool hardlink in":    "ln " + filepath.Join(outside, "other.txt") + " mine && cat mine",
				"tool hardlink out":   "ln planted-hardlink " + filepath.Join(outside, "escaped"),
				"tool move out":       "mv planted-hardlink " + filepath.Join(outside, "moved"),
				"new symlink":         "ln -s " + filepath.Join(outside, "other.txt") + " s2 && cat s2",
				"outside via workdir": "cat ../" + filepath.Base(outside) + "/other.txt",
				"device node":         "mknod null2 c 1 3",
				"setuid bit":          "cp /usr/bin/id myid && chmod u+s myid",
			}
			for name, cmd := range refused {
				r := bash(t, s, cmd)
				if r.ExitCode == 0 {
					t.Errorf("%s: `%s` succeeded:\n%s", name, cmd, r.Text)
				}
				if strings.Contains(r.Text, secret) || strings.Contains(r.Text, "root:") {
					t.Errorf("%s: `%s` leaked:\n%s", name, cmd, r.Text)
				}
			}
			for _, f := range []string{"existing.txt", "new.txt", "d", "escaped", "moved"} {
				b, err := os.ReadFile(filepath.Join(outside, f))
				if f == "existing.txt" {
					if string(b) != "original" {
						t.Errorf("existing.txt changed: %q", b)
					}
				} else if err == nil || !os.IsNotExist(err) {
					if _, serr := os.Lstat(filepath.Join(outside, f)); serr == nil {
						t.Errorf("%s was created outside the workdir", f)
					}
				}
			}
			if st, err := os.Stat(filepath.Join(work, "myid")); err == nil && st.Mode()&os.ModeSetuid != 0 {
				t.Errorf("the tool made a set-uid file: %v", st.Mode())
			}

			// What a planted hardlink gives: that one file, as it is the file; nothing
			// about the folder its other name lives in.
			r := bash(t, s, "cat planted-hardlink && echo appended >> planted-hardlink")
			if r.ExitCode != 0 || !strings.Contains(r.Text, "linked-original") {
				t.Errorf("the planted hardlink is the file, readable and writable like any workdir file:\n%s", r.Text)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "linked.txt")); string(b) != "linked-originalappended\n" {
				t.Errorf("linked.txt = %q", b)
			}

			// Inside the workdir everything works: files, folders, renames, HOME, TMPDIR.
			r = bash(t, s, `set -e; echo ok > a.txt; mkdir -p x/y; mv a.txt x/y/; cat x/y/a.txt; ln x/y/a.txt hard.txt; ln -s x/y/a.txt soft.txt; cat soft.txt; echo h > "$HOME/h"; echo t > "$TMPDIR/t"; cat "$HOME/h" "$TMPDIR/t"; rm -r x; ls /usr/bin/env >/dev/null`)
			if r.ExitCode != 0 {
				t.Fatalf("work inside the workdir failed:\n%s", r.Text)
			}
			if _, err := os.Stat(filepath.Join(work, "hard.txt")); err != nil {
				t.Errorf("hard.txt not on the host: %v", err)
			}
		})
	}
}
