// Package promreg registers Prometheus collectors so that a reload can register them
// again: Caddy gives each config a new registry, and the counters must carry on.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Adopt registers c on reg, or returns the collector of the same description already
// registered there, so the caller keeps counting on the registered one.
func Adopt[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Into adopts *p on reg and points *p at the collector that counts from now on.
func Into[C prometheus.Collector](reg prometheus.Registerer, p *C) error {
	c, err := Adopt(reg, *p)
	*p = c
	return err
}
