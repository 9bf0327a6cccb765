package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/net/http/httpguts"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/peer"
)

// PeerCredential is what the gateway presents to the peers whose URL starts with Prefix
// (docs/operators.md "Peers"): a bearer token, or a header and its value. Values may hold
// placeholders such as {env.PEER_TOKEN}, replaced when the config loads.
type PeerCredential struct {
	Prefix string `json:"prefix"`
	Bearer string `json:"bearer,omitempty"`
	Header string `json:"header,omitempty"`
	Value  string `json:"value,omitempty"`
}

// peerClient is the A2A client the app's capsules delegate through: the operator's
// credentials (their placeholders replaced now; one empty once replaced refuses the
// config), and this process's HTTP servers for peers it serves itself.
func (a *App) peerClient() (*peer.Client, error) {
	c := &peer.Client{Local: localHandler}
	repl := caddy.NewReplacer()
	for _, pc := range a.PeerCredentials {
		header, raw := pc.Header, pc.Value
		if pc.Bearer != "" {
			header, raw = "Authorization", pc.Bearer
		}
		value := repl.ReplaceAll(raw, "")
		if value == "" {
			return nil, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("peer_credential %s: %q is empty once placeholders are replaced", pc.Prefix, raw),
				"set the environment variable it names, or remove the line")
		}
		if pc.Bearer != "" {
			value = "Bearer " + value
		}
		c.Credentials = append(c.Credentials, peer.Credential{Prefix: pc.Prefix, Header: header, Value: value})
	}
	return c, nil
}

// validatePeerCredentials refuses a credential that is not for an http(s) URL prefix, or
// that holds not exactly one of a bearer token and a header with its value.
func (a *App) validatePeerCredentials() errs.List {
	var list errs.List
	for i, pc := range a.PeerCredentials {
		u, err := url.Parse(pc.Prefix)
		okPrefix := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
		okCred := (pc.Bearer != "") != (pc.Header != "" || pc.Value != "") && (pc.Bearer != "" || (httpguts.ValidHeaderFieldName(pc.Header) && pc.Value != ""))
		if !okPrefix || !okCred {
			list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("peer_credentials[%d]: %q with %s is not a credential for peers", i, pc.Prefix, describeCred(pc)),
				"write peer_credential <http(s) URL prefix> bearer <token>, or peer_credential <prefix> header <name> <value>"))
		}
	}
	return list
}

func describeCred(pc PeerCredential) string {
	switch {
	case pc.Bearer != "" && pc.Header != "":
		return "both a bearer token and a header"
	case pc.Bearer != "":
		return "a bearer token"
	case pc.Header != "":
		return "header " + pc.Header
	}
	return "nothing to present"
}

// localHandler returns the HTTP server of the running config that listens where u
// points — its port, on that address or on every address — for a peer served by this
// process, reached without a socket; nil otherwise. Only addresses written as IP
// literals or localhost are known to be this process's.
func localHandler(u *url.URL) http.Handler {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	var ip netip.Addr
	if host == "localhost" {
		ip = netip.MustParseAddr("127.0.0.1")
	} else if a, err := netip.ParseAddr(host); err == nil {
		ip = a.Unmap()
	} else {
		return nil
	}
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil || app == nil {
		return nil
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return nil
	}
	for _, srv := range httpApp.Servers {
		for _, l := range srv.Listeners() {
			ta, ok := l.Addr().(*net.TCPAddr)
			if !ok || strconv.Itoa(ta.Port) != port {
				continue
			}
			la, _ := netip.AddrFromSlice(ta.IP)
			if la.Unmap() == ip || la.IsUnspecified() {
				return srv
			}
		}
	}
	return nil
}

// unmarshalPeerCredential reads `peer_credential <prefix> bearer <token>` or
// `peer_credential <prefix> header <name> <value>`.
func (a *App) unmarshalPeerCredential(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	switch {
	case len(args) == 3 && strings.EqualFold(args[1], "bearer"):
		a.PeerCredentials = append(a.PeerCredentials, PeerCredential{Prefix: args[0], Bearer: args[2]})
	case len(args) == 4 && strings.EqualFold(args[1], "header"):
		a.PeerCredentials = append(a.PeerCredentials, PeerCredential{Prefix: args[0], Header: args[2], Value: args[3]})
	default:
		return d.Errf("peer_credential takes <URL prefix> bearer <token>, or <URL prefix> header <name> <value>")
	}
	return nil
}
