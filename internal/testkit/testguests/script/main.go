//go:build wasip1

// Command script is a capsule guest that invokes the echo tool and writes its data
// to out/result.txt.
package main

import (
	"os"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

func init() {
	capsule.Handle(func() error {
		name := "echo"
		if n := os.Getenv("TESTGUEST_TOOL"); n != "" {
			name = n // lets tests reach the error path
		}
		res, err := guest.Invoke(name, guest.ToolInput{Data: guest.Some("hello")})
		if err != nil {
			return err
		}
		if err := os.MkdirAll("/out", 0o755); err != nil {
			return err
		}
		return os.WriteFile("/out/result.txt", []byte(guest.Value(res.Data)), 0o644)
	})
}

func main() {}
