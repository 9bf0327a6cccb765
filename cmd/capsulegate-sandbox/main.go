// Command capsulegate-sandbox is the gateway's sandbox helper: installed next to the
// gateway, it is the wrapper every shell and native tool command starts through
// (docs/sandbox.md "How a command runs").
package main

import (
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/runtime/shell"
)

func main() {
	// Started as the wrapper, this never returns (the package's init already tried).
	shell.MaybeWrapper()
	fmt.Fprintf(os.Stderr, "%s: the capsulegate gateway's sandbox helper (protocol %s); the gateway starts it, it is not meant to be run by hand\n",
		shell.HelperName, shell.Protocol())
	os.Exit(2)
}
