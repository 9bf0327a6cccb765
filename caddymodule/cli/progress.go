package cli

import (
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/registry"
)

// progress prints one line per artifact on stderr and, on a terminal, a bar below them.
type progress struct {
	e   *Env
	bar bool
}

func newProgress(e *Env) *progress { return &progress{e: e, bar: e.Terminal} }

func (p *progress) report(ev registry.Progress) {
	w := p.e.Stderr
	if p.bar {
		fmt.Fprint(w, "\r\033[K") // clear the bar before the line
	}
	what := ev.Name
	if ev.Version != "" {
		what += " " + ev.Version
	}
	switch {
	case ev.Err != nil:
		fmt.Fprintf(w, "[%d/%d] %-8s %s\n", ev.Index, ev.Total, "refused", what)
	default:
		plat := ev.Platform
		if plat == "" {
			plat = "any"
		}
		if ev.Status == "local" {
			plat = "local"
		}
		fmt.Fprintf(w, "[%d/%d] %-8s %s  %s  sha256:%s  %s\n", ev.Index, ev.Total, ev.Status, what, plat, short(ev.SHA256), humanBytes(ev.Bytes))
	}
	if p.bar {
		const width = 30
		filled := width * ev.Index / max(ev.Total, 1)
		fmt.Fprintf(w, "[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat("-", width-filled), ev.Index, ev.Total)
	}
}

func (p *progress) done() {
	if p.bar {
		fmt.Fprint(p.e.Stderr, "\r\033[K")
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
