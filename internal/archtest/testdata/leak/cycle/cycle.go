// Package cycle is planted for TestInternalLeaksEndsOnCycles: its types refer to
// themselves and to each other through fields, embedding, signatures and type
// arguments, and one leak stands behind the cycles.
package cycle

import "github.com/capsulegate/capsulegate/internal/filesum"

// List refers to itself and to an unexported type that refers back.
type List[T any] struct {
	Next *List[T]
	Item T
	Link *link
}

type link struct {
	Up   *List[*link]
	Self *link
	*ring
}

// ring and ring2 embed each other; ring's Leak is promoted to link.
type ring struct {
	*ring2
	Leak *filesum.Cache
}

type ring2 struct{ *ring }

// Walk refers to itself through its signature.
type Walk func(Walk) Walk

// Tree's methods return itself.
type Tree interface {
	Kids() []Tree
	Parent() Tree
}

// Root is a List of Lists.
var Root List[List[*link]]
