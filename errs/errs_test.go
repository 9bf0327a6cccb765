package errs_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// What code outside the module does with a returned error, written as it would write it
// (an external test package): errors.As on a *errs.Error, Code, Find and Codes, through
// %w wrapping and lists.
func TestCodedErrorsReachableFromOutside(t *testing.T) {
	first := errs.New("E-MAN-004", "manifest", "bad name", "use a-z").At("murmur.yaml:2:7", "name")
	second := errs.Wrap(errors.New("cause"), "E-MAN-007", "manifest", "duplicate key", "keep one")
	tests := []struct {
		name    string
		err     error
		code    string   // what errs.Code and errors.As give
		pos     string   // the first *errs.Error's Pos, reached with errors.As
		codes   []string // errs.Codes
		findTwo bool     // errs.Find finds second's code
	}{
		{"one error", first, "E-MAN-004", "murmur.yaml:2:7", []string{"E-MAN-004"}, false},
		{"wrapped", fmt.Errorf("stage: %w", first), "E-MAN-004", "murmur.yaml:2:7", []string{"E-MAN-004"}, false},
		{"a list, wrapped", fmt.Errorf("stage: %w", errs.List{first, second}), "E-MAN-004", "murmur.yaml:2:7", []string{"E-MAN-004", "E-MAN-007"}, true},
		{"no code", errors.New("plain"), "", "", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errs.Code(tc.err); got != tc.code {
				t.Errorf("errs.Code = %q, want %q", got, tc.code)
			}
			var e *errs.Error
			if ok := errors.As(tc.err, &e); ok != (tc.code != "") {
				t.Fatalf("errors.As found a *errs.Error: %v, want %v", ok, tc.code != "")
			}
			if e != nil && (e.Code != tc.code || e.Pos != tc.pos) {
				t.Errorf("errors.As gave code %q at %q, want %q at %q", e.Code, e.Pos, tc.code, tc.pos)
			}
			if got := errs.Codes(tc.err); !slices.Equal(got, tc.codes) {
				t.Errorf("errs.Codes = %q, want %q", got, tc.codes)
			}
			if got := errs.Find(tc.err, second.Code); (got == second) != tc.findTwo {
				t.Errorf("errs.Find(%s) = %v, want found %v", second.Code, got, tc.findTwo)
			}
		})
	}
}
