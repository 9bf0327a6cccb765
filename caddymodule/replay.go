package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/capsulegate/capsulegate/caddymodule/cli"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/replay"
)

func init() {
	caddy.RegisterModule(ReplayHandler{})
	registerPathDirective("capsule_replay", parseReplayCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("capsule_replay", httpcaddyfile.Before, "respond")
}

// ReplayHandler is the HTTP handler http.handlers.capsule_replay: a stand-in model
// provider answering from the cassettes in a folder (docs/reference/cassettes.md
// "Serving"). Requests to paths other than …/v1/messages, …/v1/chat/completions and
// …/v1/responses go to the next handler.
type ReplayHandler struct {
	// Cassettes is the folder holding the *.json cassettes.
	Cassettes string `json:"cassettes,omitempty"`

	h      *replay.Handler
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (ReplayHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.capsule_replay",
		New: func() caddy.Module { return new(ReplayHandler) },
	}
}

// Provision loads the cassettes; a bad one fails the config with its coded message.
func (rh *ReplayHandler) Provision(ctx caddy.Context) error {
	if err := rh.Validate(); err != nil { // Caddy validates only after provisioning
		return err
	}
	rh.logger = ctx.Logger() // "http.handlers.capsule_replay"
	lib, err := replay.Load(rh.Cassettes)
	if err != nil {
		return err
	}
	rh.h = lib.Handler()
	rh.logger.Info("cassettes loaded", zap.String("dir", rh.Cassettes), zap.Int("conversations", lib.Conversations()))
	return nil
}

// Validate refuses a handler that names no cassette folder.
func (rh *ReplayHandler) Validate() error {
	if rh.Cassettes == "" {
		return errs.New(replay.CodeDir, "caddy", "the capsule_replay handler names no cassette folder",
			"write `capsule_replay <cassette-dir>` (JSON: \"cassettes\")")
	}
	return nil
}

// ServeHTTP answers provider API requests from the cassettes.
func (rh *ReplayHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if _, ok := replay.ProviderForPath(r.URL.Path); !ok {
		return next.ServeHTTP(w, r)
	}
	rh.h.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile reads `capsule_replay <cassette-dir>` (its matcher, if any, already
// taken by registerPathDirective).
func (rh *ReplayHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if !d.NextArg() {
		return d.ArgErr()
	}
	rh.Cassettes = d.Val()
	return lineDone(d, "capsule_replay")
}

// parseReplayCaddyfile builds the handler from the capsule_replay directive; see
// UnmarshalCaddyfile.
func parseReplayCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rh := new(ReplayHandler)
	err := rh.UnmarshalCaddyfile(h.Dispenser)
	return rh, err
}

// replayCommand is `caddy capsule replay <cassette-dir> --listen <addr>`.
func replayCommand() *cobra.Command {
	c := sub("replay <cassette-dir>", "Serves a stand-in model provider answering from cassettes, until interrupted", 1,
		func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
			defer stop()
			addr, _ := cmd.Flags().GetString("listen")
			if dir, _ := cmd.Flags().GetString("record"); dir != "" {
				upstream, _ := cmd.Flags().GetString("upstream")
				return runRecord(ctx, e, c, dir, upstream, addr)
			}
			return runReplay(ctx, e, c, args[0], addr)
		})
	c.Use = "replay <cassette-dir> | replay --record <dir> --upstream <url>"
	args := c.Args
	// Recording takes no cassette folder: --record names where the cassettes go.
	c.Args = func(cmd *cobra.Command, a []string) error {
		if dir, _ := cmd.Flags().GetString("record"); dir != "" {
			if up, _ := cmd.Flags().GetString("upstream"); up == "" || len(a) != 0 {
				usageExit(cmd, fmt.Errorf("replay --record <dir> takes --upstream <url> and no cassette folder"))
			}
			return nil
		}
		return args(cmd, a)
	}
	c.Flags().String("listen", "127.0.0.1:8089", "the address to serve on")
	c.Flags().String("record", "", "forward to --upstream and record its answers as cassettes in this folder")
	c.Flags().String("upstream", "", "the provider base URL to record from (with --record), e.g. https://api.anthropic.com")
	return c
}

// runRecord forwards to upstream on addr, recording into dir, until ctx ends.
func runRecord(ctx context.Context, e *cli.Env, c cli.Common, dir, upstream, addr string) int {
	rc, err := replay.NewRecorder(upstream, dir)
	if err == nil {
		rc.OnRecord = func(file string, turn int, err error) {
			if err != nil {
				fmt.Fprintf(e.Stderr, "capsule replay: not recorded: %v\n", err)
				return
			}
			fmt.Fprintf(e.Stderr, "capsule replay: recorded turn %d into %s\n", turn, file)
		}
		err = replay.ServeHandler(ctx, rc, addr, func(a net.Addr) {
			fmt.Fprintf(e.Stderr, "capsule replay: recording %s into %s on http://%s\n", upstream, dir, a)
		})
	}
	return replayExit(e, c, err)
}

// runReplay loads the cassettes and serves them on addr until ctx ends.
func runReplay(ctx context.Context, e *cli.Env, c cli.Common, dir, addr string) int {
	lib, err := replay.Load(dir)
	if err == nil {
		err = replay.Serve(ctx, lib, addr, func(a net.Addr) {
			fmt.Fprintf(e.Stderr, "capsule replay: serving %d conversation(s) from %s on http://%s\n", lib.Conversations(), dir, a)
		})
	}
	return replayExit(e, c, err)
}

// replayExit reports err, if any, and returns the exit code.
func replayExit(e *cli.Env, c cli.Common, err error) int {
	if err == nil {
		return cli.ExitOK
	}
	if c.JSON {
		json.NewEncoder(e.Stdout).Encode(map[string]any{"ok": false,
			"errors": []map[string]string{{"code": errs.Code(err), "message": err.Error()}}})
	} else {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(e.Stderr, "error:", line)
		}
	}
	return cli.ExitRefused
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ReplayHandler)(nil)
	_ caddy.Validator             = (*ReplayHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*ReplayHandler)(nil)
	_ caddyfile.Unmarshaler       = (*ReplayHandler)(nil)
)
