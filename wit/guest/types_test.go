//go:build !wasip1

package guest_test

import (
	"errors"
	"testing"

	"github.com/capsulegate/capsulegate/wit/guest"
)

func TestHostStubs(t *testing.T) {
	if _, err := guest.Invoke("echo", guest.ToolInput{}); !errors.Is(err, guest.ErrNotGuest) {
		t.Errorf("Invoke on the host: %v, want ErrNotGuest", err)
	}
	if got := guest.StatusError.String() + " " + guest.Status(9).String(); got != "error status(9)" {
		t.Errorf("Status strings = %q", got)
	}
	if guest.Value(nil) != "" || guest.Value(guest.Some("x")) != "x" {
		t.Error("Some/Value do not round-trip")
	}
}
