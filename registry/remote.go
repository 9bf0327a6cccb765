package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// Publisher is a registry that takes new archives (`caddy capsule publish`).
type Publisher interface {
	// Publish adds the archive, opened with every hardening rule first; platform is
	// required for native tools and refused otherwise. A different archive already
	// published under the same name, version and platform is refused (E-REG-035); the
	// same archive again is a no-op for a folder or OCI registry, and refused by Nexus,
	// whose protocol refuses every duplicate.
	Publish(ctx context.Context, data []byte, platform string) (*Blob, error)
}

// Lister is a registry that can list what it holds (`caddy capsule search`).
type Lister interface {
	List(ctx context.Context) ([]Listing, error)
}

// Listing is one published version of an artifact, as a registry lists it (Nexus's
// GET /v1/artifacts item; docs/operators.md "Registries").
type Listing struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Implementation is how the artifact runs: wasm, native or static (Nexus's "runtime").
	Implementation string `json:"runtime"`
	// Role is the artifact's own runtime: tool, hook, driver or skill (Nexus's
	// "artifact_runtime").
	Role        manifest.Role `json:"artifact_runtime"`
	Platforms   []string      `json:"platforms,omitempty"` // "linux-x86_64", …; none for wasm and skills
	Description string        `json:"description,omitempty"`
	Tags        []string      `json:"tags,omitempty"`
	// SHA256 is the platform-independent file's sha256 as the registry states it in its
	// listing ("" when it states none, or there is no such file): what a runtime pull
	// from Nexus is checked against (Murmur's Nexus does not list it; capsule_registry
	// does).
	SHA256 string `json:"sha256,omitempty"`
}

// Matches reports whether the listing answers query: every word of it found, ignoring
// case, in the name, description or tags. An empty query matches everything.
func (l Listing) Matches(query string) bool {
	hay := strings.ToLower(l.Name + "\x00" + l.Description + "\x00" + strings.Join(l.Tags, "\x00"))
	for _, w := range strings.Fields(strings.ToLower(query)) {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

// Kinds of registry source.
const (
	KindLocal = "local" // a folder
	KindOCI   = "oci"   // an OCI distribution registry, one repository per artifact
	KindNexus = "nexus" // Murmur's Nexus HTTP registry
)

// Source is where a registry lives, as --registry, $CAPSULE_REGISTRY or the capsule
// app's registry option name it (docs/operators.md "Registries").
type Source struct {
	Kind string
	// Dir is a local registry's folder.
	Dir string
	// Base is a remote registry's address: for OCI "host[:port]/repo/prefix" (no
	// scheme), for Nexus "http(s)://host[:port][/path]" (no trailing slash).
	Base string
	// PlainHTTP is set for oci+http:// and nexus+http://, which only loopback may use.
	PlainHTTP bool
	// Spec is the text the source was parsed from, credentials removed.
	Spec string
}

// Remote reports whether the source is reached over the network.
func (s Source) Remote() bool { return s.Kind != KindLocal }

func (s Source) String() string { return s.Spec }

// ParseSource reads a registry named by a folder or a URL: oci://host/repo,
// oci+http://127.0.0.1:port/repo (loopback only), nexus+https://host[/path] or
// nexus+http://127.0.0.1:port[/path] (loopback only). Anything else holding "://" is
// refused with E-REG-080.
func ParseSource(spec string) (Source, error) {
	if !strings.Contains(spec, "://") {
		return Source{Kind: KindLocal, Dir: spec, Spec: spec}, nil
	}
	bad := func(why string) (Source, error) {
		return Source{}, errs.New(CodeRemote, "registry", fmt.Sprintf("registry %q: %s", redactURL(spec), why),
			"name a folder, oci://host/repo, nexus+https://host, or on loopback oci+http://127.0.0.1:port/repo or nexus+http://127.0.0.1:port")
	}
	u, err := url.Parse(spec)
	if err != nil {
		// url.Parse's error repeats the input, credentials included: say only what failed.
		return bad("not a URL")
	}
	if u.User != nil {
		return bad("credentials in the URL are refused; they would show in logs and configs")
	}
	if u.Host == "" {
		return bad("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return bad("a query or fragment is not part of a registry address")
	}
	src := Source{Spec: u.String()}
	switch u.Scheme {
	case "oci", "oci+http":
		src.Kind, src.PlainHTTP = KindOCI, u.Scheme == "oci+http"
		repo := strings.Trim(u.Path, "/")
		if repo == "" {
			return bad("no repository path: write oci://host/repo")
		}
		if repo != strings.ToLower(repo) {
			return bad("an OCI repository path is lower case")
		}
		src.Base = u.Host + "/" + repo
	case "nexus+https", "nexus+http":
		src.Kind, src.PlainHTTP = KindNexus, u.Scheme == "nexus+http"
		scheme := "https"
		if src.PlainHTTP {
			scheme = "http"
		}
		src.Base = scheme + "://" + u.Host + strings.TrimRight(u.Path, "/")
	default:
		return bad("the scheme " + u.Scheme + ":// is not one this release serves")
	}
	if src.PlainHTTP && !loopbackHost(u.Hostname()) {
		return bad("plain HTTP is allowed only on loopback (127.0.0.0/8, ::1, localhost): use " + strings.TrimSuffix(u.Scheme, "+http") + map[string]string{"oci": "://", "nexus": "+https://"}[strings.TrimSuffix(u.Scheme, "+http")])
	}
	return src, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// redactURL drops a URL's user information, for messages; it does not rely on the URL
// parsing, since one that does not parse may still hold a password.
func redactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return s[:i+3] + "…@" + rest[at+1:]
	}
	return s
}

// Auth is how a gateway or a command proves itself to a remote registry. Every field
// may be empty.
type Auth struct {
	// Token is a bearer token: Nexus's API key (else $NEXUS_API_KEY), or an OCI
	// registry's token.
	Token string
	// Username and Password are an OCI registry's basic credentials.
	Username, Password string
	// DockerConfig is the Docker credential config an OCI registry's credentials are
	// read from when none is given above; "" is $DOCKER_CONFIG/config.json, else
	// ~/.docker/config.json.
	DockerConfig string
}

// EnvNexusKey names the environment variable holding Nexus's API key, as Murmur's own
// tools read it.
const EnvNexusKey = "NEXUS_API_KEY"

// RemoteTimeout bounds connecting to a remote registry and waiting for its answer to
// start, as Murmur's own client bounds a request; RemoteBodyTimeout bounds a whole
// request, body included, so that an archive of hundreds of MiB can come over a slower
// link.
const (
	RemoteTimeout     = 30 * time.Second
	RemoteBodyTimeout = 10 * time.Minute
)

// remoteClient is the HTTP client of remote registries when the caller gives none.
func remoteClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: RemoteTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = RemoteTimeout
	tr.ResponseHeaderTimeout = RemoteTimeout
	return &http.Client{Timeout: RemoteBodyTimeout, Transport: tr}
}

// OpenOptions configure Open.
type OpenOptions struct {
	Auth Auth
	// Getenv reads the environment ($NEXUS_API_KEY, $DOCKER_CONFIG, $HOME); nil is os.Getenv.
	Getenv func(string) string
	// Client makes a remote registry's requests; nil is a client with RemoteTimeout to
	// connect and to start answering, and RemoteBodyTimeout in all.
	Client *http.Client
	// Cache, when set, keeps a remote registry's verified archives by sha256, so that
	// what the lock pins stages with the registry down. A local registry needs none.
	Cache *Cache
}

// Open returns the registry src names. A local registry is a *Local; a remote one
// also implements Publisher and Lister, and Caching when opts.Cache is set.
func Open(src Source, opts OpenOptions) (Registry, error) {
	if opts.Client == nil {
		opts.Client = remoteClient()
	}
	var r Registry
	switch src.Kind {
	case KindLocal:
		return NewLocal(src.Dir), nil
	case KindOCI:
		o, err := NewOCI(src, opts)
		if err != nil {
			return nil, err
		}
		r = o
	case KindNexus:
		r = NewNexus(src, opts)
	default:
		return nil, errs.New(CodeRemote, "registry", fmt.Sprintf("registry %q has no kind this release serves", src.Spec), "name a folder or a supported URL")
	}
	if opts.Cache != nil {
		return &cached{Registry: r, cache: opts.Cache}, nil
	}
	return r, nil
}

// Caching is a registry whose verified archives are kept in a Cache: Resolve looks there
// first for what the lock pins, and adds what it has verified.
type Caching interface {
	Registry
	Cache() *Cache
}

// cached is a remote registry with its cache.
type cached struct {
	Registry
	cache *Cache
}

func (c *cached) Cache() *Cache { return c.cache }

// VerifiesSHA256 marks the cached registry as Verifying: Open wraps only OCI and Nexus,
// which hash every answer against their own statement.
func (c *cached) VerifiesSHA256() {}

var (
	_ Verifying = (*OCI)(nil)
	_ Verifying = (*Nexus)(nil)
	_ Verifying = (*cached)(nil)
)

// Publish passes to the registry underneath.
func (c *cached) Publish(ctx context.Context, data []byte, platform string) (*Blob, error) {
	p, ok := c.Registry.(Publisher)
	if !ok {
		return nil, errs.New(CodeRemote, "registry", fmt.Sprintf("registry %s does not take publications", c), "publish to a folder, an OCI or a Nexus registry")
	}
	return p.Publish(ctx, data, platform)
}

// List passes to the registry underneath.
func (c *cached) List(ctx context.Context) ([]Listing, error) {
	l, ok := c.Registry.(Lister)
	if !ok {
		return nil, errs.New(CodeRemote, "registry", fmt.Sprintf("registry %s cannot list what it holds", c), "search a folder, an OCI or a Nexus registry")
	}
	return l.List(ctx)
}

func (c *cached) String() string { return fmt.Sprint(c.Registry) }
