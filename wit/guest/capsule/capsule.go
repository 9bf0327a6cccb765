// Package capsule makes a Go program a script capsule guest: importing it exports
// murmur:capsule/run@0.1.0#run, and Handle installs the function it calls.
package capsule

var handler func() error

// Handle installs h as the capsule's run function; call it from an init function.
// Because run returns nothing, an error from h (or a panic) traps the guest: the host
// sees a failed call with the message on the guest's stderr.
func Handle(h func() error) { handler = h }
