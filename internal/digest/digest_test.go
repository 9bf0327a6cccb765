package digest

import (
	"strings"
	"testing"
)

func TestDigest(t *testing.T) {
	sum := Hex([]byte("abc"))
	if sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || !Valid(sum) {
		t.Fatalf("Hex(abc) = %s", sum)
	}
	for _, s := range []string{"", strings.ToUpper(sum), sum[:63], sum + "0", strings.Repeat("g", 64)} {
		if Valid(s) {
			t.Errorf("Valid(%q)", s)
		}
	}
}
