// Package leak is planted for TestInternalLeaksReportsPlanted: its exported API mentions
// internal types of the module in each kind of position the check walks, beside
// positions callers cannot reach, which the check must not report.
package leak

import (
	"github.com/capsulegate/capsulegate/internal/filesum"
	"github.com/capsulegate/capsulegate/internal/wasmbin"
)

// Open returns an internal type.
func Open() (*filesum.Cache, error) { return nil, nil }

// Read takes a func over an internal type.
func Read(f func(wasmbin.Section) bool) {}

// Of constrains its type parameter with internal types.
func Of[T *filesum.Cache | *wasmbin.Reader](v T) {}

// Default's type is internal.
var Default *filesum.Cache

// Config has an exported field of an internal type and an unexported one.
type Config struct {
	Cache  *filesum.Cache
	hidden wasmbin.Section
}

// Set takes an internal type inside a map.
func (c *Config) Set(s map[string][]wasmbin.Section) { c.hidden = s[""][0] }

// set is unexported: callers cannot reach it.
func (c *Config) set(s wasmbin.Section) { c.hidden = s }

// Sections is declared over an internal type.
type Sections []wasmbin.Section

// Section aliases an internal type.
type Section = wasmbin.Section

// Source's method returns an internal type.
type Source interface {
	Next() (wasmbin.Section, error)
	next() wasmbin.Section
}

// Box is generic: its instance Boxed has an internal type argument.
type Box[T any] struct{ V T }

// Boxed's type argument is internal.
var Boxed Box[*filesum.Cache]

// Node refers to itself and to node, which refers back: the walk must end. Through the
// unexported embedded inner, its field Reader and method Sum are promoted to Node.
type Node struct {
	Next *Node
	Kids []*node
	*inner
}

type node struct {
	Up     *Node
	Back   *node
	Sum    *filesum.Cache
	hidden *filesum.Cache
}

type inner struct {
	Reader *wasmbin.Reader
	*inner2
}

type inner2 struct{ *inner }

// Sum is promoted to Node.
func (i *inner) Sum() *filesum.Cache { return nil }

// private is unexported and returns an internal type no caller can reach.
func private() *filesum.Cache { return nil }

var _, _ = private, (*Config).set
