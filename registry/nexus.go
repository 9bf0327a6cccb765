package registry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"unicode"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// The headers of Nexus's protocol and of our own extension to it.
const (
	// HeaderSHA256 states the sha256 of the bytes of a GET /v1/artifacts/{name}/{version}.
	HeaderSHA256 = "x-murmur-sha256"
	// HeaderPlatform names the platform of the file served when it is platform-specific;
	// NexusServer sends it, Murmur's Nexus does not.
	HeaderPlatform = "x-capsulegate-platform"
)

// Nexus protocol values (docs/operators.md "Registries").
const (
	nexusStatic       = "static" // Nexus's runtime of skills
	maxNexusListing   = 16 << 20 // bytes of a GET /v1/artifacts answer
	maxNexusSmallBody = 64 << 10 // bytes of an error or a publish answer
)

// Nexus is a client of Murmur's Nexus registry (docs/operators.md "Registries"): it
// fetches with GET /v1/artifacts/{name}/{version}, publishes with POST /v1/artifacts and
// lists with GET /v1/artifacts, sending the API key as a bearer token.
type Nexus struct {
	src       Source
	token     string
	keySource string // where token came from, for messages
	client    *http.Client
}

// NewNexus returns the Nexus registry src names; its API key is opts.Auth.Token, else
// $NEXUS_API_KEY.
func NewNexus(src Source, opts OpenOptions) *Nexus {
	token, from := opts.Auth.Token, "registry_auth's token"
	if token == "" {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		token, from = getenv(EnvNexusKey), "$"+EnvNexusKey
	}
	client := *remoteClient()
	if opts.Client != nil {
		client = *opts.Client
	}
	// The key must not follow a redirect onto plain HTTP, where anyone on the path
	// could read it (Go's client keeps it on a redirect to the same host).
	next := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" && !loopbackHost(req.URL.Hostname()) {
			return errors.New("refused a redirect to plain HTTP off loopback")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &Nexus{src: src, token: token, keySource: from, client: &client}
}

// String names the registry as it was given, credentials removed.
func (n *Nexus) String() string { return n.src.Spec }

// VerifiesSHA256 marks Nexus as Verifying: Fetch hashes every body and compares it with
// the registry's x-murmur-sha256.
func (n *Nexus) VerifiesSHA256() {}

// artifactURL is the address of name@version, with platform as its query when given.
func (n *Nexus) artifactURL(name, version, platform string) string {
	u := n.src.Base + "/v1/artifacts/" + url.PathEscape(name) + "/" + url.PathEscape(version)
	if platform != "" {
		u += "?" + url.Values{"platform": {platform}}.Encode()
	}
	return u
}

// Fetch downloads ref, checks the bytes against the registry's x-murmur-sha256 and
// opens the archive to tell whether the file served is platform-specific: Nexus answers
// a platform query with the platform's file if there is one, else the generic file, and
// does not say which.
func (n *Nexus) Fetch(ctx context.Context, ref Ref) (*Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	u := n.artifactURL(ref.Name, ref.Version, ref.Platform)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, n.protocolErr(err, u, "cannot build the request")
	}
	resp, err := n.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, n.statusErr(resp, u, ref)
	}
	if resp.ContentLength > MaxArchiveFileBytes {
		return nil, nexusTooLarge(ref, u, resp.ContentLength)
	}
	stated := resp.Header.Get(HeaderSHA256)
	if !digest.Valid(stated) {
		return nil, refuse(CodeRemoteProtocol,
			fmt.Sprintf("artifact %s: registry %s answered without a valid %s header (got %q): the sha256 of the bytes must be stated", ref, u, HeaderSHA256, clip.String(stated, 100)),
			"point the registry option at a Nexus registry, or upgrade the registry")
	}
	data, err := n.readBody(ctx, resp, u, MaxArchiveFileBytes)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > MaxArchiveFileBytes {
		return nil, nexusTooLarge(ref, u, int64(len(data)))
	}
	// The registry's header is never trusted alone: the caller also checks the lock.
	if got := digest.Hex(data); got != stated {
		return nil, refuse(CodeHashMismatch,
			fmt.Sprintf("artifact %s: registry %s states sha256 %s in %s, but the bytes it sent hash to %s", ref, u, stated, HeaderSHA256, got),
			"the download or the registry's copy is damaged or was altered: try again, and if it persists publish the artifact again from a trusted build")
	}
	a, err := openedArchives.open(data, stated)
	if err != nil {
		return nil, err
	}
	platform := ""
	if a.Manifest().Implementation == manifest.ImplNative {
		platform = ref.Platform
	}
	// NexusServer names the platform-specific file it served: it must agree.
	if said, ok := resp.Header[http.CanonicalHeaderKey(HeaderPlatform)]; ok && (len(said) != 1 || said[0] != platform) {
		return nil, refuse(CodeRemoteProtocol,
			fmt.Sprintf("artifact %s: registry %s says in %s that it served a file for %q, but the archive is for %q", ref, u, HeaderPlatform, clip.String(strings.Join(said, ","), 100), cmp.Or(platform, "every platform")),
			"publish the artifact again with the right platform")
	}
	return &Blob{Name: ref.Name, Version: ref.Version, Platform: platform, Data: data, SHA256: stated}, nil
}

func nexusTooLarge(ref Ref, u string, n int64) error {
	return refuse(CodeDeclaredSize, fmt.Sprintf("artifact %s: registry %s sends %d bytes or more, over the %d-byte limit of an archive", ref, u, n, int64(MaxArchiveFileBytes)),
		"keep an artifact under 500 MiB")
}

// nexusPublished is Nexus's answer to a publication.
type nexusPublished struct {
	ArtifactID string `json:"artifact_id"`
	SHA256     string `json:"sha256"`
}

// Publish opens data with every hardening rule and checks the platform rules, both
// before a byte is sent, then uploads it. Nexus refuses every republication of a name,
// version and platform, even of the same bytes (E-REG-035).
func (n *Nexus) Publish(ctx context.Context, data []byte, platform string) (*Blob, error) {
	a, err := openForPublish(ctx, data, platform)
	if err != nil {
		return nil, err
	}
	m := a.Manifest()
	ref := Ref{Name: m.Name, Version: m.Version, Platform: platform}
	q := url.Values{"name": {m.Name}, "version": {m.Version}, "runtime": {nexusRuntime(m)}}
	if platform != "" {
		q.Set("platform", platform)
	}
	u := n.src.Base + "/v1/artifacts?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return nil, n.protocolErr(err, u, "cannot build the request")
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	// A refusal (key, duplicate) then comes before the archive is sent.
	req.Header.Set("Expect", "100-continue")
	resp, err := n.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sum := digest.Hex(data)
	switch resp.StatusCode {
	case http.StatusCreated:
	case http.StatusConflict:
		return nil, refuse(CodeConflict,
			fmt.Sprintf("artifact %s is already published in registry %s, which never replaces a published version, even with the same bytes (this archive has sha256 %s)", ref, n.src.Base, sum),
			"published versions never change: bump the version in murmur.yaml and publish again")
	case http.StatusUnprocessableEntity:
		return nil, refuse(CodeReserved, fmt.Sprintf("artifact %s: registry %s refuses the version: %s", ref, n.src.Base, n.serverText(resp)),
			"give a concrete version such as 1.0.0 in murmur.yaml")
	case http.StatusBadRequest:
		return nil, refuse(CodeRemoteProtocol, fmt.Sprintf("artifact %s: registry %s refused the upload as bad input: %s", ref, n.src.Base, n.serverText(resp)),
			"check the archive with `caddy capsule pack`, and that the registry serves this runtime and platform")
	case http.StatusRequestEntityTooLarge:
		return nil, refuse(CodeDeclaredSize, fmt.Sprintf("artifact %s: registry %s refuses %d bytes as too large: %s", ref, n.src.Base, len(data), n.serverText(resp)),
			"make the artifact smaller, or raise the registry's upload limit")
	default:
		return nil, n.statusErr(resp, u, ref)
	}
	body, err := n.readBody(ctx, resp, u, maxNexusSmallBody)
	if err != nil {
		return nil, err
	}
	var got nexusPublished
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, n.protocolErr(err, u, fmt.Sprintf("artifact %s: the answer to the upload is not Nexus's JSON", ref))
	}
	if got.SHA256 != sum {
		return nil, refuse(CodeRemoteProtocol,
			fmt.Sprintf("artifact %s: registry %s states it stored sha256 %q, but the archive sent has sha256 %s", ref, n.src.Base, clip.String(got.SHA256, 100), sum),
			"the upload was damaged or altered on its way: check the registry and its proxies, then publish a new version")
	}
	return &Blob{Name: m.Name, Version: m.Version, Platform: platform, Data: data, SHA256: sum}, nil
}

// nexusRuntime is Nexus's runtime of an artifact: its implementation, static for skills.
func nexusRuntime(m *manifest.ArtifactManifest) string {
	if m.Runtime == manifest.RoleSkill {
		return nexusStatic
	}
	return cmp.Or(m.Implementation, manifest.ImplWasm)
}

// List returns every version of every artifact the registry holds.
func (n *Nexus) List(ctx context.Context) ([]Listing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := n.src.Base + "/v1/artifacts"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, n.protocolErr(err, u, "cannot build the request")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := n.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, n.statusErr(resp, u, Ref{})
	}
	data, err := n.readBody(ctx, resp, u, maxNexusListing)
	if err != nil {
		return nil, err
	}
	if len(data) > maxNexusListing {
		return nil, refuse(CodeRemoteProtocol, fmt.Sprintf("registry %s lists more than %d bytes", u, maxNexusListing), "search a registry with fewer artifacts, or fetch by name")
	}
	out, err := decodeNexusListing(data)
	if err != nil {
		if e, ok := err.(*errs.Error); ok {
			e.Msg = "registry " + u + ": " + e.Msg
		}
		return nil, err
	}
	return out, nil
}

// do sends req with the API key, if any. A failure to connect and a timeout are
// E-REG-083; an ended ctx is returned as it is.
func (n *Nexus) do(req *http.Request) (*http.Response, error) {
	if n.token != "" {
		req.Header.Set("Authorization", "Bearer "+n.token)
	}
	req.Header.Set("User-Agent", "capsulegate")
	resp, err := n.client.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, n.downErr(err, urlForMessage(req.URL))
	}
	return resp, nil
}

func urlForMessage(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// readBody reads at most limit+1 bytes of resp's body: a caller finding more than limit
// refuses the answer.
func (n *Nexus) readBody(ctx context.Context, resp *http.Response, u string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, n.downErr(err, u)
	}
	return data, nil
}

func (n *Nexus) downErr(err error, u string) error {
	return refuseWrap(err, CodeRemoteDown, fmt.Sprintf("registry %s cannot be reached or did not answer in time", u),
		"check the registry's address and that it is up; what the lock pins can still stage from the artifact cache")
}

func (n *Nexus) protocolErr(err error, u, what string) error {
	return refuseWrap(err, CodeRemoteProtocol, fmt.Sprintf("registry %s: %s", u, what), "point the registry option at a Nexus registry")
}

// statusErr explains an answer other than success: refused credentials, a missing
// artifact (when ref names one), a registry that is down, or one that does not speak
// Nexus's protocol.
func (n *Nexus) statusErr(resp *http.Response, u string, ref Ref) error {
	text := n.serverText(resp)
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		why := "refused the API key from " + n.keySource
		if n.token == "" {
			why = "wants an API key, and none was given (neither registry_auth's token nor $NEXUS_API_KEY)"
		}
		return refuse(CodeRemoteAuth, fmt.Sprintf("registry %s %s (HTTP %d: %s)", u, why, code, text),
			"check that NEXUS_API_KEY, or the capsule app's registry_auth, holds a key this registry accepts")
	case code == http.StatusNotFound && ref.Name != "":
		if strings.Contains(text, "no variant for platform") || strings.Contains(text, CodeNoVariant) {
			return refuse(CodeNoVariant, fmt.Sprintf("artifact %s: registry %s has no file for this platform: %s", ref, u, text),
				"run on a platform the artifact is published for, or publish a build for this one")
		}
		return refuse(CodeNotFound, fmt.Sprintf("artifact %s: registry %s does not have it: %s", ref, u, text),
			"check the name and version, or publish it with `caddy capsule publish`")
	case code >= 500 || code == http.StatusTooManyRequests:
		return refuse(CodeRemoteDown, fmt.Sprintf("registry %s failed (HTTP %d: %s)", u, code, text),
			"try again later, or ask the registry's operator; what the lock pins can still stage from the artifact cache")
	}
	return refuse(CodeRemoteProtocol, fmt.Sprintf("registry %s answered HTTP %d, which Nexus's protocol does not have here: %s", u, resp.StatusCode, text),
		"point the registry option at a Nexus registry (nexus+https://host[/path])")
}

// serverText is the registry's own explanation: the "error" of its JSON answer (with
// its "code", when NexusServer sends one), else the start of its body, made printable.
func (n *Nexus) serverText(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxNexusSmallBody))
	var e struct {
		Error json.RawMessage `json:"error"`
		Code  string          `json:"code"`
	}
	text := string(body)
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) != nil {
			s = string(e.Error) // Nexus's validation errors are structured
		}
		text = s
		if e.Code != "" && !strings.Contains(text, e.Code) {
			text = e.Code + ": " + text
		}
	}
	text = clip.String(PrintableText(text), 500)
	if text == "" {
		return "no explanation given"
	}
	return text
}

// PrintableText is s without control characters (newlines and tabs become spaces) and
// without invalid UTF-8: a remote registry's text, safe to print on a terminal.
func PrintableText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
}

// nexusItem is one item of Nexus's GET /v1/artifacts, its fields read one by one so that
// a refusal can name the field.
type nexusItem map[string]json.RawMessage

// decodeNexusListing reads Nexus's GET /v1/artifacts answer: an array of items whose
// name, version, runtime and artifact_runtime are required non-empty strings; platforms
// are [os, arch] pairs, description a string or null, tags strings. Anything else is
// refused (E-REG-085) naming the item and the field.
func decodeNexusListing(data []byte) ([]Listing, error) {
	bad := func(what string, err error) error {
		return refuseWrap(err, CodeRemoteProtocol, "the listing "+what, "point the registry option at a Nexus registry, or upgrade the registry")
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, bad("is not a JSON array", nil)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(trimmed, &items); err != nil {
		return nil, bad("is not valid JSON", err)
	}
	out := make([]Listing, 0, len(items))
	for i, raw := range items {
		var it nexusItem
		if err := json.Unmarshal(raw, &it); err != nil || it == nil {
			return nil, bad(fmt.Sprintf("item %d is not a JSON object", i), err)
		}
		l, err := it.listing()
		if err != nil {
			return nil, bad(fmt.Sprintf("item %d: %s", i, err.Error()), nil)
		}
		if !listable(l) {
			continue // Fetch would refuse it; as a hostile OCI manifest, it is left out
		}
		out = append(out, l)
	}
	return out, nil
}

// listable reports whether a listing's item names an artifact this client could fetch:
// a name and version by the manifest's rules, and platforms of [a-z0-9_] words. An item
// naming a path ("../../etc"), a version with a slash, or a platform holding control
// characters is left out rather than shown to a model or an operator.
func listable(l Listing) bool {
	if !manifest.ValidName(l.Name) || manifest.CheckVersion(l.Version) != "" {
		return false
	}
	for _, p := range l.Platforms {
		os, arch, _ := strings.Cut(p, "-")
		if !platformWord.MatchString(os) || !platformWord.MatchString(arch) {
			return false
		}
	}
	return true
}

var platformWord = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (it nexusItem) listing() (Listing, error) {
	var l Listing
	var role string
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &l.Name}, {"version", &l.Version}, {"runtime", &l.Implementation}, {"artifact_runtime", &role}} {
		raw, ok := it[f.key]
		if !ok || string(raw) == "null" {
			return l, fmt.Errorf("field %q is missing", f.key)
		}
		if json.Unmarshal(raw, f.dst) != nil {
			return l, fmt.Errorf("field %q is not a string", f.key)
		}
		if *f.dst == "" {
			return l, fmt.Errorf("field %q is empty", f.key)
		}
	}
	l.Role = manifest.Role(role)
	if raw, ok := it["description"]; ok && json.Unmarshal(raw, &l.Description) != nil {
		return l, errors.New(`field "description" is neither a string nor null`)
	}
	if raw, ok := it["tags"]; ok && json.Unmarshal(raw, &l.Tags) != nil {
		return l, errors.New(`field "tags" is not a list of strings`)
	}
	if len(l.Tags) == 0 {
		l.Tags = nil // as Local lists an artifact without tags
	}
	if raw, ok := it["sha256"]; ok && (json.Unmarshal(raw, &l.SHA256) != nil || (l.SHA256 != "" && !digest.Valid(l.SHA256))) {
		return l, errors.New(`field "sha256" is not 64 lowercase hex characters`)
	}
	if raw, ok := it["platforms"]; ok {
		var pairs [][]string
		if json.Unmarshal(raw, &pairs) != nil {
			return l, errors.New(`field "platforms" is not a list of [os, arch] pairs`)
		}
		for j, p := range pairs {
			if len(p) != 2 || p[0] == "" || p[1] == "" {
				return l, fmt.Errorf(`field "platforms": entry %d is not an [os, arch] pair`, j)
			}
			l.Platforms = append(l.Platforms, p[0]+"-"+p[1])
		}
	}
	return l, nil
}

var (
	_ Verifying    = (*Nexus)(nil)
	_ Publisher    = (*Nexus)(nil)
	_ Lister       = (*Nexus)(nil)
	_ fmt.Stringer = (*Nexus)(nil)
)
