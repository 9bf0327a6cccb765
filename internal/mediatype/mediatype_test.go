package mediatype

import "testing"

func TestValidRange(t *testing.T) {
	for mt, want := range map[string]bool{
		"application/pdf": true, "image/*": true, "*/*": true, "Text/Plain; charset=utf-8": true,
		"*/png": false, "pdf": false, "image/": false, "/png": false, "a b/c": false, "image/p(ng": false, "": false,
	} {
		if got := ValidRange(mt); got != want {
			t.Errorf("ValidRange(%q) = %v, want %v", mt, got, want)
		}
	}
}

func TestOfFile(t *testing.T) {
	for _, tc := range []struct{ given, name, want string }{
		{"image/png", "a.pdf", "image/png"},
		{"", "a.pdf", "application/pdf"},
		{"", "noext", "application/octet-stream"},
		{"", "", "application/octet-stream"},
	} {
		if got := OfFile(tc.given, tc.name); got != tc.want {
			t.Errorf("OfFile(%q, %q) = %q, want %q", tc.given, tc.name, got, tc.want)
		}
	}
}
