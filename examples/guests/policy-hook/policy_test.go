package main

import "testing"

func TestShellRunsRm(t *testing.T) {
	script := func(s string) *string { return &s }
	tests := []struct {
		name   string
		binary string
		argv   []string
		script *string
		deny   bool
	}{
		{"rm by name", "rm", []string{"rm", "-rf", "x"}, nil, true},
		{"rm by resolved path", "/usr/bin/rm", []string{"rm", "x"}, nil, true},
		{"xargs runs rm", "/usr/bin/xargs", []string{"xargs", "rm"}, nil, true},
		{"find -exec rm", "/usr/bin/find", []string{"find", ".", "-exec", "/bin/rm", "{}", ";"}, nil, true},
		{"grep for rm is fine", "/usr/bin/grep", []string{"grep", "rm", "notes"}, nil, false},
		{"script invoking rm", "/usr/bin/bash", []string{"bash", "-c", "ls; rm -f a"}, script("ls; rm -f a"), true},
		{"script with /bin/rm", "/usr/bin/sh", []string{"sh", "-c", "cd x && /bin/rm a"}, script("cd x && /bin/rm a"), true},
		{"rmdir is not rm", "/usr/bin/bash", []string{"bash", "-c", "rmdir a"}, script("rmdir a"), false},
		{"format is not rm", "/usr/bin/bash", []string{"bash", "-c", "echo format"}, script("echo format"), false},
		{"ls", "/usr/bin/ls", []string{"ls", "-l"}, nil, false},
		{"no argv", "ls", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if why := shellRunsRm(tt.binary, tt.argv, tt.script); (why != "") != tt.deny {
				t.Errorf("shellRunsRm = %q, want deny %v", why, tt.deny)
			}
		})
	}
}

func TestMentionsRm(t *testing.T) {
	for s, want := range map[string]bool{
		`{"text":"rm -rf /tmp/x"}`: true, "x;rm y": true, "/bin/rm": true,
		"rmdir": false, "format": false, "inform rm-ish": false, "": false,
	} {
		if got := mentionsRm(s); got != want {
			t.Errorf("mentionsRm(%q) = %v, want %v", s, got, want)
		}
	}
}
