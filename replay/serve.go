package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// shutdownGrace bounds how long Serve waits for requests in flight after ctx ends.
const shutdownGrace = 5 * time.Second

// Serve serves lib on addr until ctx ends, then shuts down gracefully and returns nil.
// ready, if set, is called with the bound address once the listener is open.
func Serve(ctx context.Context, lib *Library, addr string, ready func(net.Addr)) error {
	return ServeHandler(ctx, lib.Handler(), addr, ready)
}

// ServeHandler is Serve for any handler (a Recorder).
func ServeHandler(ctx context.Context, h http.Handler, addr string, ready func(net.Addr)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return errs.Wrap(err, CodeListen, "replay", fmt.Sprintf("cannot listen on %q", addr), "choose a free host:port, e.g. --listen 127.0.0.1:8089")
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
