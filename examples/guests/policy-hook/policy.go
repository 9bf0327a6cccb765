package main

import (
	"path"
	"slices"
	"strings"
	"unicode"
)

// The policy is plain Go, apart from the wasm exports (main.go), so its tests run on
// the host: go test ./examples/guests/policy-hook.
func main() {}

// launchers run another program named in their arguments: `xargs rm` runs rm, `grep rm`
// does not.
var launchers = []string{"xargs", "find", "env", "nice", "nohup", "timeout", "sudo", "doas"}

// shellRunsRm says why a command runs rm ("" when it does not): its binary is rm, a
// launcher's argv names rm (xargs rm, find -exec rm), or its script invokes rm.
func shellRunsRm(binary string, argv []string, script *string) string {
	if path.Base(binary) == "rm" {
		return "the command's binary is rm"
	}
	if slices.Contains(launchers, path.Base(binary)) {
		for _, a := range argv[min(1, len(argv)):] {
			if path.Base(a) == "rm" {
				return "the command has " + path.Base(binary) + " run rm"
			}
		}
	}
	if script != nil && mentionsRm(*script) {
		return "the script invokes rm"
	}
	return ""
}

// mentionsRm reports whether s has rm as a word, a path ending in /rm included: words
// are split at anything but letters, digits, '-', '_', '.' and '/', so "rm -rf x",
// "x; rm y" and "/bin/rm" count and "format" or "rmdir" do not.
func mentionsRm(s string) bool {
	words := strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_./", r)
	})
	for _, w := range words {
		if path.Base(w) == "rm" {
			return true
		}
	}
	return false
}
