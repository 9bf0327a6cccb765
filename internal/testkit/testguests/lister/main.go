//go:build wasip1

// Command lister is a script capsule for the escape suite: it answers with every file
// under its "/" that holds the word PAYLOAD, one line each: its path as the guest sees it,
// a space, its first line. What a task's message gave it, and where, as a guest finds it.
package main

import (
	"bufio"
	"io/fs"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

func init() {
	capsule.Handle(func() error {
		var out strings.Builder
		fs.WalkDir(os.DirFS("."), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || p == "out/result.txt" {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			line, _ := bufio.NewReader(f).ReadString('\n')
			if strings.Contains(line, "PAYLOAD") {
				out.WriteString(p + " " + strings.TrimSpace(line) + "\n")
			}
			return nil
		})
		if err := os.MkdirAll("out", 0o755); err != nil {
			return err
		}
		return os.WriteFile("out/result.txt", []byte(out.String()), 0o644)
	})
}

func main() {}
