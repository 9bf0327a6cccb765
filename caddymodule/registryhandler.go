package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
)

func init() {
	caddy.RegisterModule(RegistryHandler{})
	registerPathDirective("capsule_registry", parseRegistryCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("capsule_registry", httpcaddyfile.Before, "respond")
}

// MinRegistryToken is the shortest publish_token or read_token capsule_registry takes.
const MinRegistryToken = 16

// RegistryHandler is the HTTP handler http.handlers.capsule_registry: it serves a local
// registry folder over Nexus's protocol (registry.NexusServer), so that `caddy capsule
// publish --registry nexus+https://…` and Murmur's tools publish to it and gateways
// fetch from it. It answers every request of its route.
type RegistryHandler struct {
	// Root is the registry folder (default: the capsule app's default, registry.LocalDir).
	Root string `json:"root,omitempty"`
	// PublishToken is the bearer token uploads need; none turns publishing off.
	// Placeholders such as {env.X} are replaced.
	PublishToken string `json:"publish_token,omitempty"`
	// ReadToken is the bearer token fetches and listings need; none leaves them open.
	// Placeholders such as {env.X} are replaced.
	ReadToken string `json:"read_token,omitempty"`

	srv    *registry.NexusServer
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (RegistryHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.capsule_registry", New: func() caddy.Module { return new(RegistryHandler) }}
}

// Provision resolves the folder and the tokens; a token that is too short, or a folder
// named by a URL, refuses the config.
func (rh *RegistryHandler) Provision(ctx caddy.Context) error {
	rh.logger = ctx.Logger() // "http.handlers.capsule_registry"
	if strings.Contains(rh.Root, "://") {
		return serveErr(fmt.Sprintf("capsule_registry root %q is a URL; it serves a local folder", rh.Root),
			"name the registry folder, e.g. `capsule_registry /srv/capsule-registry`")
	}
	root, err := registry.LocalDir(rh.Root, os.Getenv, caddy.AppDataDir())
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return errs.Wrap(err, registry.CodeServe, "caddy", fmt.Sprintf("cannot resolve the capsule_registry folder %q", root), "use an absolute path")
	}
	root = abs
	repl := caddy.NewReplacer()
	publish, read := repl.ReplaceAll(rh.PublishToken, ""), repl.ReplaceAll(rh.ReadToken, "")
	for _, tok := range []struct{ option, configured, value string }{
		{"publish_token", rh.PublishToken, publish}, {"read_token", rh.ReadToken, read},
	} {
		if err := checkRegistryToken(tok.option, tok.configured, tok.value); err != nil {
			return err
		}
	}
	rh.srv = &registry.NexusServer{Local: registry.NewLocal(root), PublishToken: publish, ReadToken: read,
		OnPublish: func(b *registry.Blob) {
			rh.logger.Info("artifact published", zap.String("name", b.Name), zap.String("version", b.Version),
				zap.String("platform", b.Platform), zap.String("sha256", b.SHA256))
		},
		OnError: func(r *http.Request, err error) {
			rh.logger.Error("registry request failed", zap.String("method", r.Method), zap.String("uri", r.RequestURI), zap.Error(err))
		},
	}
	rh.logger.Info("serving a capsule registry", zap.String("root", root), zap.Bool("publishing", publish != ""), zap.Bool("read_token", read != ""))
	return nil
}

// checkRegistryToken refuses a token configured (any placeholders replaced) shorter than
// MinRegistryToken: an unset {env.X} would otherwise turn publishing off, or reading
// open, without a word.
func checkRegistryToken(option, configured, value string) error {
	if configured == "" || len(value) >= MinRegistryToken {
		return nil
	}
	return serveErr(fmt.Sprintf("capsule_registry %s is %d bytes once placeholders are replaced; a token must be at least %d bytes", option, len(value), MinRegistryToken),
		fmt.Sprintf("put a long random token (`openssl rand -hex 32`) in an environment variable, export it before starting Caddy, and write %s {env.VARIABLE}", option))
}

func serveErr(msg, fix string) error {
	return errs.New(registry.CodeServe, "caddy", msg, fix)
}

// ServeHTTP answers the Nexus protocol; nothing passes to the next handler.
func (rh *RegistryHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	rh.srv.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile reads the directive (its matcher, if any, already taken by
// registerPathDirective)
//
//	capsule_registry [<root>] {
//	    root          <dir>
//	    publish_token <token>
//	    read_token    <token>
//	}
func (rh *RegistryHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		rh.Root = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	arg := rh.Root
	rh.Root = ""
	if err := stringBlock(d, "capsule_registry", []string{"root", "publish_token", "read_token"},
		[]*string{&rh.Root, &rh.PublishToken, &rh.ReadToken}); err != nil {
		return err
	}
	if arg != "" && rh.Root != "" {
		return d.Errf("capsule_registry: the folder is given twice, as the argument and as root")
	}
	if arg != "" {
		rh.Root = arg
	}
	return nil
}

// parseRegistryCaddyfile builds the handler from the capsule_registry directive; see
// UnmarshalCaddyfile.
func parseRegistryCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rh := new(RegistryHandler)
	err := rh.UnmarshalCaddyfile(h.Dispenser)
	return rh, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*RegistryHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*RegistryHandler)(nil)
	_ caddyfile.Unmarshaler       = (*RegistryHandler)(nil)
)
