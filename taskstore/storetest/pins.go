package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
)

// testPins is the table's row for a store that implements taskstore.Pins (skipped for
// one that does not): RunPins with the harness's restart, then a write after Close.
func testPins(t *testing.T, h *harness) {
	if _, ok := h.s.(taskstore.Pins); !ok {
		t.Skipf("%T does not implement taskstore.Pins", h.s)
	}
	current := func() taskstore.Pins {
		t.Helper()
		p, ok := h.s.(taskstore.Pins)
		if !ok {
			t.Fatalf("the store opened again (%T) does not implement taskstore.Pins", h.s)
		}
		return p
	}
	checkPins(t, current(), func() taskstore.Pins { h.restart(); return current() })

	p := current()
	h.close()
	wantCode(t, "PutRuntimePin after Close", p.PutRuntimePin(context.Background(), pin("late", "1.0.0")), taskstore.CodeClosed)
	h.open()
	if got := pinNames(t, current(), capsule); strings.Contains(got, "late") {
		t.Errorf("a PutRuntimePin refused after Close was kept: %q", got)
	}
}

// RunPins checks an implementation of taskstore.Pins on its own (taskstore.MemPins, or
// a store outside Run): put, replace, name order, delete, capsules kept apart, refusals,
// concurrent writers. reopen, when not nil, restarts the store — closes it and opens the
// same place again — and returns it: every pin written must survive it. p must hold no
// pins of the capsules "hello" and "other".
func RunPins(t *testing.T, p taskstore.Pins, reopen func() taskstore.Pins) {
	checkPins(t, p, reopen)
}

// pin is a valid runtime pin of capsule "hello".
func pin(name, version string) taskstore.RuntimePin {
	return taskstore.RuntimePin{Capsule: capsule, Name: name, Version: version,
		SHA256: strings.Repeat(fmt.Sprintf("%x", len(name)%16), 62) + "0f", Registry: "hub", Role: "tool",
		Implementation: "wasm", Origin: taskstore.OriginRuntime, Pulled: t0, By: "task-" + name}
}

func samePin(a, b taskstore.RuntimePin) bool {
	return a.Capsule == b.Capsule && a.Name == b.Name && a.Version == b.Version && a.SHA256 == b.SHA256 &&
		a.Registry == b.Registry && a.Role == b.Role && a.Implementation == b.Implementation && a.Platform == b.Platform &&
		a.Origin == b.Origin && a.Pulled.Equal(b.Pulled) && a.By == b.By
}

// pinsOf reads the capsule's pins, failing t on an error.
func pinsOf(t *testing.T, p taskstore.Pins, c string) []taskstore.RuntimePin {
	t.Helper()
	got, err := p.RuntimePins(context.Background(), c)
	if err != nil {
		t.Fatalf("RuntimePins(%q): %v", c, err)
	}
	for _, g := range got {
		if g.Capsule != c {
			t.Errorf("RuntimePins(%q) gave a pin of capsule %q", c, g.Capsule)
		}
	}
	return got
}

// pinNames is the capsule's pins as "name@version" words, in the order given.
func pinNames(t *testing.T, p taskstore.Pins, c string) string {
	t.Helper()
	var out []string
	for _, g := range pinsOf(t, p, c) {
		out = append(out, g.Name+"@"+g.Version)
	}
	return strings.Join(out, " ")
}

func putPin(t *testing.T, p taskstore.Pins, rp taskstore.RuntimePin) {
	t.Helper()
	if err := p.PutRuntimePin(context.Background(), rp); err != nil {
		t.Fatalf("PutRuntimePin(%s/%s): %v", rp.Capsule, rp.Name, err)
	}
}

func checkPins(t *testing.T, p taskstore.Pins, reopen func() taskstore.Pins) {
	ctx := context.Background()
	if got := pinsOf(t, p, capsule); len(got) != 0 {
		t.Fatalf("RuntimePins of a capsule with none: %d pins", len(got))
	}

	// Put, read back whole, in name order (bytewise: "a-c" before "ab", "b10" before "b9").
	full := pin("jq", "1.7.1")
	full.Platform, full.Role, full.Implementation = "linux-amd64", "skill", "native"
	full.SHA256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, rp := range []taskstore.RuntimePin{pin("b9", "1"), pin("ab", "2.0.0"), full, pin("a-c", "0.1.0+build.7"), pin("b10", "v3")} {
		putPin(t, p, rp)
	}
	if got := pinNames(t, p, capsule); got != "a-c@0.1.0+build.7 ab@2.0.0 b10@v3 b9@1 jq@1.7.1" {
		t.Errorf("RuntimePins: %q, want name order", got)
	}
	for _, g := range pinsOf(t, p, capsule) {
		if g.Name == "jq" && !samePin(g, full) {
			t.Errorf("pin jq read back as %+v, want %+v", g, full)
		}
	}

	// Replace: one pin per name, the newest.
	newer := pin("ab", "2.1.0")
	newer.SHA256, newer.Pulled, newer.By, newer.Registry = strings.Repeat("e", 64), t0.Add(time.Hour), "", "mirror"
	putPin(t, p, newer)
	got := pinsOf(t, p, capsule)
	if len(got) != 5 || got[1].Name != "ab" || !samePin(got[1], newer) {
		t.Errorf("after replacing ab: %+v, want 5 pins with ab as %+v", got, newer)
	}

	// Another capsule's pins are its own.
	other := pin("ab", "9.9.9")
	other.Capsule = "other"
	putPin(t, p, other)
	if got := pinNames(t, p, "other"); got != "ab@9.9.9" {
		t.Errorf("the other capsule's pins: %q, want ab@9.9.9", got)
	}
	if got := pinNames(t, p, capsule); !strings.Contains(got, "ab@2.1.0") || strings.Contains(got, "9.9.9") {
		t.Errorf("pins after another capsule's put: %q", got)
	}

	// Delete: there was one, then not; an absent pin is not an error.
	if had, err := p.DeleteRuntimePin(ctx, capsule, "b9"); err != nil || !had {
		t.Errorf("DeleteRuntimePin of a pin held: %v, %v; want true, nil", had, err)
	}
	if had, err := p.DeleteRuntimePin(ctx, capsule, "b9"); err != nil || had {
		t.Errorf("DeleteRuntimePin of a pin deleted: %v, %v; want false, nil", had, err)
	}
	if had, err := p.DeleteRuntimePin(ctx, capsule, "never"); err != nil || had {
		t.Errorf("DeleteRuntimePin of a pin never written: %v, %v; want false, nil", had, err)
	}
	if had, err := p.DeleteRuntimePin(ctx, "nobody", "ab"); err != nil || had {
		t.Errorf("DeleteRuntimePin in a capsule with no pins: %v, %v; want false, nil", had, err)
	}
	if got := pinNames(t, p, capsule); got != "a-c@0.1.0+build.7 ab@2.1.0 b10@v3 jq@1.7.1" {
		t.Errorf("after deleting b9: %q", got)
	}
	if got := pinNames(t, p, "other"); got != "ab@9.9.9" {
		t.Errorf("the other capsule's pins after a delete: %q", got)
	}

	// Refusals: nothing is written.
	long := strings.Repeat("x", taskstore.MaxIDLen+1)
	bad := func(f func(*taskstore.RuntimePin)) taskstore.RuntimePin {
		rp := pin("refused", "1.0.0")
		f(&rp)
		return rp
	}
	for _, c := range []struct {
		name string
		pin  taskstore.RuntimePin
		code string
	}{
		{"no capsule", bad(func(p *taskstore.RuntimePin) { p.Capsule = "" }), taskstore.CodeBadID},
		{"long capsule", bad(func(p *taskstore.RuntimePin) { p.Capsule = long }), taskstore.CodeBadID},
		{"NUL in capsule", bad(func(p *taskstore.RuntimePin) { p.Capsule = "a\x00b" }), taskstore.CodeBadID},
		{"no name", bad(func(p *taskstore.RuntimePin) { p.Name = "" }), taskstore.CodeBadPin},
		{"upper-case name", bad(func(p *taskstore.RuntimePin) { p.Name = "Refused" }), taskstore.CodeBadPin},
		{"name with a slash", bad(func(p *taskstore.RuntimePin) { p.Name = "a/b" }), taskstore.CodeBadPin},
		{"name with a leading hyphen", bad(func(p *taskstore.RuntimePin) { p.Name = "-a" }), taskstore.CodeBadPin},
		{"name of 101", bad(func(p *taskstore.RuntimePin) { p.Name = strings.Repeat("a", 101) }), taskstore.CodeBadPin},
		{"no version", bad(func(p *taskstore.RuntimePin) { p.Version = "" }), taskstore.CodeBadPin},
		{"version of 129", bad(func(p *taskstore.RuntimePin) { p.Version = strings.Repeat("1", 129) }), taskstore.CodeBadPin},
		{"version with a newline", bad(func(p *taskstore.RuntimePin) { p.Version = "1.0\n" }), taskstore.CodeBadPin},
		{"version with a space", bad(func(p *taskstore.RuntimePin) { p.Version = "1 0" }), taskstore.CodeBadPin},
		{"version not UTF-8", bad(func(p *taskstore.RuntimePin) { p.Version = "1.\xff" }), taskstore.CodeBadPin},
		{"no sha256", bad(func(p *taskstore.RuntimePin) { p.SHA256 = "" }), taskstore.CodeBadPin},
		{"upper-case sha256", bad(func(p *taskstore.RuntimePin) { p.SHA256 = strings.Repeat("A", 64) }), taskstore.CodeBadPin},
		{"short sha256", bad(func(p *taskstore.RuntimePin) { p.SHA256 = strings.Repeat("a", 63) }), taskstore.CodeBadPin},
		{"sha256 not hex", bad(func(p *taskstore.RuntimePin) { p.SHA256 = strings.Repeat("g", 64) }), taskstore.CodeBadPin},
		{"no origin", bad(func(p *taskstore.RuntimePin) { p.Origin = "" }), taskstore.CodeBadPin},
		{"origin lock", bad(func(p *taskstore.RuntimePin) { p.Origin = "lock" }), taskstore.CodeBadPin},
		{"role driver", bad(func(p *taskstore.RuntimePin) { p.Role = "driver" }), taskstore.CodeBadPin},
		{"no role", bad(func(p *taskstore.RuntimePin) { p.Role = "" }), taskstore.CodeBadPin},
		{"implementation cgi", bad(func(p *taskstore.RuntimePin) { p.Implementation = "cgi" }), taskstore.CodeBadPin},
		{"long registry", bad(func(p *taskstore.RuntimePin) { p.Registry = long }), taskstore.CodeBadID},
		{"NUL in by", bad(func(p *taskstore.RuntimePin) { p.By = "t\x00" }), taskstore.CodeBadID},
	} {
		t.Run("refused "+c.name, func(t *testing.T) {
			if err := taskstore.CheckRuntimePin(c.pin); err == nil {
				t.Errorf("CheckRuntimePin passed it")
			}
			wantCode(t, "PutRuntimePin "+c.name, p.PutRuntimePin(ctx, c.pin), c.code)
		})
	}
	_, readErr := p.RuntimePins(ctx, "")
	wantCode(t, "RuntimePins no capsule", readErr, taskstore.CodeBadID)
	_, delErr := p.DeleteRuntimePin(ctx, long, "ab")
	wantCode(t, "DeleteRuntimePin long capsule", delErr, taskstore.CodeBadID)
	_, delErr = p.DeleteRuntimePin(ctx, capsule, "A/B")
	wantCode(t, "DeleteRuntimePin bad name", delErr, taskstore.CodeBadPin)
	if got := pinNames(t, p, capsule); got != "a-c@0.1.0+build.7 ab@2.1.0 b10@v3 jq@1.7.1" {
		t.Errorf("after refused writes: %q, want them to have written nothing", got)
	}
	if err := taskstore.CheckRuntimePin(pin("ok-1", "1.0.0")); err != nil {
		t.Errorf("CheckRuntimePin of a valid pin: %v", err)
	}
	edge := pin(strings.Repeat("z", 100), strings.Repeat("9", 128))
	edge.Implementation, edge.Platform, edge.By, edge.Registry, edge.Pulled = "", "", "", long[1:], time.Time{}
	putPin(t, p, edge)
	if got := pinsOf(t, p, capsule); len(got) != 5 || !samePin(got[4], edge) {
		t.Errorf("a pin at every bound (and a zero time): the pins read back are %+v, want the last %+v", got, edge)
	}

	// Concurrent writers of their own names.
	const writers = 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rp := pin(fmt.Sprintf("w%d", w), "1.0.0")
			rp.Capsule = "other"
			if err := p.PutRuntimePin(ctx, rp); err != nil {
				t.Errorf("a concurrent PutRuntimePin: %v", err)
			}
		})
	}
	wg.Wait()
	if got := len(pinsOf(t, p, "other")); got != writers+1 {
		t.Errorf("after %d concurrent writers: %d pins of other, want %d", writers, got, writers+1)
	}

	if reopen == nil {
		return
	}
	want := pinsOf(t, p, capsule)
	p = reopen()
	got = pinsOf(t, p, capsule)
	if len(got) != len(want) {
		t.Fatalf("after a restart: %d pins, want %d", len(got), len(want))
	}
	for i := range want {
		if !samePin(got[i], want[i]) {
			t.Errorf("after a restart, pin %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if had, err := p.DeleteRuntimePin(ctx, capsule, "jq"); err != nil || !had {
		t.Errorf("DeleteRuntimePin after a restart: %v, %v", had, err)
	}
	p = reopen()
	if got := pinNames(t, p, capsule); strings.Contains(got, "jq") || !strings.Contains(got, "a-c@") {
		t.Errorf("after a delete and a restart: %q, want jq gone and the rest kept", got)
	}
	if got := len(pinsOf(t, p, "other")); got != writers+1 {
		t.Errorf("the other capsule's pins after restarts: %d, want %d", got, writers+1)
	}
}
