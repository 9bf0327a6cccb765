package wasip2

import (
	"sort"
	"strings"
	"sync"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// param is one named parameter of a WIT function.
type param struct {
	name string
	t    *abi.Type
}

// spec is one served function: its WIT type, canonical ABI and implementation.
type spec struct {
	iface, name string
	params      []param
	result      *abi.Type // nil: no result
	// impl runs the call on lifted arguments and returns the result (nil without one).
	impl func(c *call, a []any) (any, error)
	// pre, if set, checks the flat arguments before they are lifted (a length that would
	// make lifting expensive).
	pre func(h *Host, flat []uint64) error

	f   *abi.Func
	wit string
}

var (
	regOnce sync.Once
	reg     map[string]*spec
)

// registry is every served function by "interface#name".
func registry() map[string]*spec {
	regOnce.Do(func() {
		reg = map[string]*spec{}
		for _, group := range [][]*spec{ioSpecs(), cliSpecs(), clockRandomSpecs(), fsSpecs(), httpSpecs()} {
			for _, s := range group {
				types := make([]*abi.Type, len(s.params))
				for i, p := range s.params {
					types[i] = p.t
				}
				var results []*abi.Type
				if s.result != nil {
					results = []*abi.Type{s.result}
				}
				s.f = abi.NewFunc(types, results)
				s.wit = renderWIT(s.params, s.result)
				key := s.iface + "#" + s.name
				if reg[key] != nil {
					panic("wasip2: " + key + " defined twice")
				}
				reg[key] = s
			}
		}
	})
	return reg
}

// renderWIT writes a function type as WIT does, with own<T> spelt out.
func renderWIT(params []param, result *abi.Type) string {
	var b strings.Builder
	b.WriteString("func(")
	for i, p := range params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.name + ": " + p.t.String())
	}
	b.WriteString(")")
	if result != nil {
		b.WriteString(" -> " + result.String())
	}
	return b.String()
}

func sortStrings(s []string) { sort.Strings(s) }

// fn builds a spec.
func fn(iface, name string, params []param, result *abi.Type, impl func(c *call, a []any) (any, error)) *spec {
	return &spec{iface: iface, name: name, params: params, result: result, impl: impl}
}

func ps(p ...param) []param { return p }

func pr(name string, t *abi.Type) param { return param{name, t} }

// drop builds the [resource-drop] function of resource k.
func drop(iface string, k kind) *spec {
	return fn(iface, "[resource-drop]"+k.String(), ps(pr("self", abi.Own(k.String()))), nil,
		func(c *call, a []any) (any, error) { return nil, c.h.tab.drop(a[0].(uint32), k) })
}

// self is the borrow<k> parameter of a method.
func self(k kind) param { return pr("self", abi.Borrow(k.String())) }

// own is the own<k> type.
func own(k kind) *abi.Type { return abi.Own(k.String()) }

// borrowed returns the value of handle v (a lifted borrow) as a T.
func borrowed[T any](c *call, v any, k kind) (T, error) {
	x, err := c.h.tab.get(v.(uint32), k)
	return as[T](x, err, v, k)
}

// taken removes handle v (a lifted own parameter) and returns its value as a T.
func taken[T any](c *call, v any, k kind) (T, error) {
	x, err := c.h.tab.take(v.(uint32), k)
	return as[T](x, err, v, k)
}

// as is x, the value of handle v of kind k, as a T.
func as[T any](x any, err error, v any, k kind) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	t, ok := x.(T)
	if !ok {
		return zero, trapf(CodeHandle, true, "handle %d does not hold a %s", v, k)
	}
	return t, nil
}

func ok(v any) abi.Result   { return abi.Result{Value: v} }
func fail(v any) abi.Result { return abi.Result{Err: true, Value: v} }
func some(v any) abi.Option { return abi.Option{Some: true, Value: v} }

var none = abi.Option{}
