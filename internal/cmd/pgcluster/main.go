// Command pgcluster runs a throwaway PostgreSQL cluster for the benchmarks
// (internal/cmd/a2aload/storebench.sh): it starts one with internal/testkit/pgtest —
// durable unless -fast, so that commits pay their fsync as a production server's do —
// creates a database, prints its postgres:// URL on one line, and removes the cluster when
// its standard input closes or it is signalled.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

func main() {
	fast := flag.Bool("fast", false, "fsync and synchronous_commit off (the tests' settings)")
	flag.Parse()
	c, err := pgtest.Start(pgtest.Options{Durable: !*fast})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgcluster:", err)
		os.Exit(1)
	}
	defer c.Close()
	dsn, err := c.CreateDatabase()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgcluster:", err)
		c.Close()
		os.Exit(1)
	}
	fmt.Println(dsn)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
}
