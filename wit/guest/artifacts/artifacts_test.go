//go:build !wasip1

package artifacts_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/artifacts"
)

func TestNotGuest(t *testing.T) {
	_, e1 := artifacts.List()
	_, e2 := artifacts.Describe("x")
	_, e3 := artifacts.Search("x")
	_, e4 := artifacts.Pull("x", "1.0.0")
	_, e5 := artifacts.Remove("x")
	_, e6 := artifacts.Diagnostics()
	for i, err := range []error{e1, e2, e3, e4, e5, e6} {
		if !errors.Is(err, guest.ErrNotGuest) {
			t.Errorf("call %d on the host: %v, want ErrNotGuest", i, err)
		}
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(artifacts.RuntimeState{CapsuleID: "c", Installed: []artifacts.Summary{{Name: "a", Version: "1", Runtime: artifacts.RuntimeNative}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"capsule-id":"c","installed":[{"name":"a","version":"1","runtime":"native"}],"capabilities":""}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	if s := artifacts.RuntimeType(9).String(); s != "runtime-type(9)" {
		t.Error(s)
	}
}
