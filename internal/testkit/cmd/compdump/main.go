// Command compdump prints a WebAssembly component's world and instantiation plan:
// imports and exports with their versions and function types, the embedded core
// modules with their sizes and imports, and the steps an instantiator runs. It is how
// the fixtures the component runtime must serve are catalogued.
//
//	go run ./internal/testkit/cmd/compdump tool.wasm [more.wasm ...]
package main

import (
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/runtime/wasm/component"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compdump component.wasm ...")
		os.Exit(2)
	}
	failed := false
	for _, name := range os.Args[1:] {
		if err := dump(name); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func dump(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	c, err := component.Parse(b)
	if err != nil {
		return err
	}
	p, err := c.Plan()
	if err != nil {
		return err
	}
	fmt.Printf("== %s (%d bytes)\n", name, len(b))
	return p.WriteSummary(os.Stdout)
}
