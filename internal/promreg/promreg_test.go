package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestAdopt(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	got, err := Adopt(reg, first)
	if err != nil || got != first {
		t.Fatalf("first: %v %v", got, err)
	}
	again := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	if got, err := Adopt(reg, again); err != nil || got != first {
		t.Fatalf("again: adopted %v, %v; want the registered one", got, err)
	}
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "other help"})
	if _, err := Adopt(reg, clash); err == nil {
		t.Fatal("a different collector under the same name was accepted")
	}
}

func TestInto(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := prometheus.NewCounter(prometheus.CounterOpts{Name: "y_total", Help: "y"})
	if err := reg.Register(first); err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "y_total", Help: "y"})
	if err := Into(reg, &c); err != nil || c != first {
		t.Fatalf("Into left %v, %v; want the registered collector", c, err)
	}
}
