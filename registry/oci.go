package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orasreg "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/capsulegate/capsulegate/errs"
	sha "github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/manifest"
)

// Media types of artifacts in an OCI registry (docs/operators.md "Registries").
const (
	// OCIArtifactType is the artifactType of a manifest holding a .mur.zip.
	OCIArtifactType = "application/vnd.capsulegate.artifact.v1"
	// OCILayerMediaType is the media type of the one layer holding the .mur.zip bytes.
	OCILayerMediaType = "application/vnd.capsulegate.mur.v1+zip"
	// WasmConfigMediaType is the config media type of a CNCF Wasm OCI artifact (a plain
	// wasm component), read as a tool.
	WasmConfigMediaType = "application/vnd.wasm.config.v0+json"
	// WasmLayerMediaType is the media type of a CNCF Wasm OCI artifact's one layer.
	WasmLayerMediaType = "application/wasm"
)

// Annotations of a capsulegate artifact's manifest.
const (
	AnnotationName           = "dev.capsulegate.artifact.name"
	AnnotationVersion        = "dev.capsulegate.artifact.version"
	AnnotationRuntime        = "dev.capsulegate.artifact.runtime"        // the role: tool, hook, driver, skill
	AnnotationImplementation = "dev.capsulegate.artifact.implementation" // wasm, native or static
	AnnotationPlatform       = "dev.capsulegate.artifact.platform"       // native builds only
	AnnotationTags           = "dev.capsulegate.artifact.tags"           // comma-joined
)

const (
	// maxOCIManifestBytes bounds a manifest read, as oras-go bounds metadata.
	maxOCIManifestBytes = 4 << 20
	// List's bounds: repositories under Base, tags per repository, catalog pages read.
	ociListRepos   = 1000
	ociListTags    = 1000
	ociCatalogPage = 100
	ociCatalogMax  = 1000 // pages
	ociTagRule     = "[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
)

var ociTagRE = regexp.MustCompile(`^` + ociTagRule + `$`)

// OCI is a registry in an OCI distribution registry (docs/operators.md "Registries"):
// artifact <name> version <version> is repository <Base>/<name>, tag <version> with '+'
// written '_' (Helm's convention), a native build's tag suffixed -<platform>. Every tag
// holds an image manifest with one layer: the .mur.zip, so the layer digest is the sha256
// a local registry and murmur.lock state. A plain wasm component in the CNCF Wasm OCI
// layout is read as a tool. Tags are mutable in OCI: two publishers of different bytes
// racing on one tag cannot both be refused, the last one wins.
type OCI struct {
	src    Source
	host   string // host[:port]
	path   string // the repository prefix
	client *auth.Client
	// creds says where credentials come from, for messages; never a secret.
	creds string
}

var (
	_ Registry  = (*OCI)(nil)
	_ Publisher = (*OCI)(nil)
	_ Lister    = (*OCI)(nil)
	_ Verifying = (*OCI)(nil)
)

// NewOCI returns the OCI registry src names, with credentials from opts.Auth: a username
// and password, else a token, else the Docker credential config (none there: anonymous).
func NewOCI(src Source, opts OpenOptions) (*OCI, error) {
	host, path, _ := strings.Cut(src.Base, "/")
	if _, err := remote.NewRepository(src.Base + "/a"); err != nil || host == "" || path == "" {
		return nil, refuseWrap(err, CodeRemote, fmt.Sprintf("registry %q: %q is not host[:port]/repository", src.Spec, src.Base), "write oci://host/repo")
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cred, creds, err := ociCredentials(host, opts.Auth, getenv)
	if err != nil {
		return nil, err
	}
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{Timeout: RemoteTimeout}
	}
	c := &auth.Client{Client: hc, Header: http.Header{"User-Agent": {"capsulegate"}}, Credential: cred, Cache: auth.NewCache()}
	if src.PlainHTTP {
		// A loopback registry's token service is on loopback too; oras-go refuses such
		// realms by default, against a remote registry sending tokens to local services.
		c.BlockedRealmPrefixes = slices.DeleteFunc(auth.DefaultBlockedRealmPrefixes(), func(p netip.Prefix) bool {
			return p.Addr().IsLoopback()
		})
	}
	return &OCI{src: src, host: host, path: path, client: c, creds: creds}, nil
}

// ociCredentials picks the credential source; creds describes it without any secret.
func ociCredentials(host string, a Auth, getenv func(string) string) (auth.CredentialFunc, string, error) {
	switch {
	case a.Username != "" || a.Password != "":
		return auth.StaticCredential(host, auth.Credential{Username: a.Username, Password: a.Password}), "the username and password given", nil
	case a.Token != "":
		return auth.StaticCredential(host, auth.Credential{AccessToken: a.Token}), "the token given", nil
	}
	path := a.DockerConfig
	if path == "" {
		if d := getenv("DOCKER_CONFIG"); d != "" {
			path = filepath.Join(d, "config.json")
		} else if h := getenv("HOME"); h != "" {
			path = filepath.Join(h, ".docker", "config.json")
		}
	}
	if path == "" {
		return nil, "no credentials (anonymous: $DOCKER_CONFIG and $HOME are unset)", nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "no credentials (anonymous: " + path + " does not exist)", nil
	}
	store, err := credentials.NewStore(path, credentials.StoreOptions{})
	if err != nil {
		return nil, "", refuseWrap(err, CodeRemoteAuth, fmt.Sprintf("registry %s: the Docker credential config %s cannot be read", host, path),
			"fix the file (docker login writes it), or give the registry's username and password or token")
	}
	return credentials.Credential(store), "the Docker credential config " + path, nil
}

func (o *OCI) String() string { return o.src.Spec }

// VerifiesSHA256 marks OCI as Verifying: Fetch hashes every layer it returns and checks
// it against the manifest's digest.
func (o *OCI) VerifiesSHA256() {}

// repoName is the repository of artifact name.
func (o *OCI) repoName(name string) string { return o.path + "/" + name }

// repository is the oras-go client of artifact name's repository.
func (o *OCI) repository(name string) (*remote.Repository, error) {
	r, err := remote.NewRepository(o.host + "/" + o.repoName(name))
	if err != nil {
		return nil, refuseWrap(err, CodeRemote, fmt.Sprintf("registry %s: no repository can be named for artifact %s", o.src.Spec, name), "check the registry URL")
	}
	r.Client, r.PlainHTTP, r.MaxMetadataBytes = o.client, o.src.PlainHTTP, maxOCIManifestBytes
	return r, nil
}

// ociTag is the tag of name@version, of its build for platform when one is given; a
// version that cannot be written as a tag is refused with E-REG-087.
func ociTag(name, version, platform string) (string, error) {
	tag := strings.ReplaceAll(version, "+", "_")
	if platform != "" {
		tag += "-" + platform
	}
	if !ociTagRE.MatchString(tag) {
		return "", refuse(CodeOCITag, fmt.Sprintf("artifact %s: version %q cannot be an OCI tag: written %q it breaks the tag rule %s ('+' is written '_')", name, version, tag, ociTagRule),
			"use a version of letters, digits, '.', '_', '-' and '+', not starting with '.' or '-', short enough to take a -<platform> suffix within 128 characters")
	}
	return tag, nil
}

// splitOCITag reads a tag back: the version it stands for, every '_' read as '+' (so a
// version that held '_' reads wrong: Fetch's messages say so), and the platform of a
// native build's tag. ok is false when no usable version results.
func splitOCITag(tag string) (version, platform string, ok bool) {
	for _, p := range Platforms() {
		if base, found := strings.CutSuffix(tag, "-"+p); found && base != "" {
			tag, platform = base, p
			break
		}
	}
	version = strings.ReplaceAll(tag, "_", "+")
	return version, platform, manifest.CheckVersion(version) == ""
}

// ociManifest is what Fetch needs of a manifest decodeOCIManifest accepted.
type ociManifest struct {
	// Wasm says the manifest is a CNCF Wasm OCI artifact, not a capsulegate archive.
	Wasm        bool
	SHA256      string // the layer's digest, lowercase hex
	Size        int64  // the layer's size
	Title       string // the layer's org.opencontainers.image.title
	Annotations map[string]string
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        *int64            `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

// decodeOCIManifest checks a manifest against everything Fetch relies on: an OCI image
// manifest (schemaVersion 2) with one layer, either a capsulegate archive (artifactType,
// empty config, name and version annotations) or a CNCF wasm component (wasm config),
// whose sha256 digest is well formed and whose size is at most MaxArchiveFileBytes. A
// refusal is E-REG-085 saying what is wrong; callers add whose manifest it is.
func decodeOCIManifest(data []byte) (*ociManifest, error) {
	bad := func(format string, a ...any) (*ociManifest, error) {
		return nil, refuse(CodeRemoteProtocol, "the manifest "+fmt.Sprintf(format, a...),
			"publish the artifact again with `caddy capsule publish`, or push the wasm component in the CNCF Wasm OCI layout")
	}
	if len(data) > maxOCIManifestBytes {
		return bad("is over %d bytes", maxOCIManifestBytes)
	}
	var m struct {
		SchemaVersion *int              `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		ArtifactType  string            `json:"artifactType"`
		Config        *ociDescriptor    `json:"config"`
		Layers        []ociDescriptor   `json:"layers"`
		Annotations   map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return bad("is not an OCI image manifest in JSON: %v", err)
	}
	switch {
	case m.SchemaVersion == nil || *m.SchemaVersion != 2:
		return bad("does not have schemaVersion 2")
	case m.MediaType != ocispec.MediaTypeImageManifest:
		return bad("has media type %q, not %s", m.MediaType, ocispec.MediaTypeImageManifest)
	case m.Config == nil:
		return bad("has no config")
	case len(m.Layers) != 1:
		return bad("has %d layers; an artifact has exactly one", len(m.Layers))
	}
	if why := checkDescriptor(*m.Config, maxOCIManifestBytes); why != "" {
		return bad("config %s", why)
	}
	l := m.Layers[0]
	if why := checkDescriptor(l, MaxArchiveFileBytes); why != "" {
		return bad("layer %s", why)
	}
	out := &ociManifest{SHA256: strings.TrimPrefix(l.Digest, "sha256:"), Size: *l.Size, Title: l.Annotations[ocispec.AnnotationTitle], Annotations: m.Annotations}
	switch l.MediaType {
	case OCILayerMediaType:
		switch {
		case m.ArtifactType != OCIArtifactType:
			return bad("has a %s layer but artifactType %q, not %s", OCILayerMediaType, m.ArtifactType, OCIArtifactType)
		case m.Config.MediaType != ocispec.MediaTypeEmptyJSON:
			return bad("has a %s layer but config media type %q, not %s", OCILayerMediaType, m.Config.MediaType, ocispec.MediaTypeEmptyJSON)
		case m.Annotations[AnnotationName] == "" || m.Annotations[AnnotationVersion] == "":
			return bad("does not name its artifact (annotations %s and %s)", AnnotationName, AnnotationVersion)
		}
	case WasmLayerMediaType:
		out.Wasm = true
		switch {
		case m.Config.MediaType != WasmConfigMediaType:
			return bad("has a %s layer but config media type %q, not %s", WasmLayerMediaType, m.Config.MediaType, WasmConfigMediaType)
		case m.ArtifactType != "" && m.ArtifactType != WasmConfigMediaType:
			return bad("has a %s layer but artifactType %q", WasmLayerMediaType, m.ArtifactType)
		}
	default:
		return bad("has a layer of media type %q, neither %s nor %s", l.MediaType, OCILayerMediaType, WasmLayerMediaType)
	}
	return out, nil
}

// checkDescriptor says what is wrong with a descriptor, "" if nothing: it needs a sha256
// digest in lowercase hex and a size from 0 to limit.
func checkDescriptor(d ociDescriptor, limit int64) string {
	algo, hex, found := strings.Cut(d.Digest, ":")
	switch {
	case !found || algo != "sha256":
		return fmt.Sprintf("digest %q is not a sha256 digest", d.Digest)
	case !sha.Valid(hex):
		return fmt.Sprintf("digest %q does not hold 64 lowercase hex characters", d.Digest)
	case d.Size == nil:
		return "has no size"
	case *d.Size < 0 || *d.Size > limit:
		return fmt.Sprintf("size %d is not between 0 and %d bytes", *d.Size, limit)
	}
	return ""
}

// Fetch returns the archive for ref: the platform build's tag when ref.Platform has one,
// else the plain tag. The layer's bytes are checked against the manifest's digest. A
// plain wasm component comes back as its wasm bytes with Archive set to a tool archive
// made of them.
func (o *OCI) Fetch(ctx context.Context, ref Ref) (*Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	plain, err := ociTag(ref.Name, ref.Version, "")
	if err != nil {
		return nil, err
	}
	repo := o.repoName(ref.Name)
	for _, p := range ref.candidates() {
		tag := plain
		if p != "" {
			if tag += "-" + p; !ociTagRE.MatchString(tag) {
				continue // too long to have been published
			}
		}
		m, err := o.manifestAt(ctx, ref, repo, tag)
		if err != nil {
			return nil, err
		}
		if m == nil || (m.Wasm && p != "") { // a plain component is no platform build
			continue
		}
		if !m.Wasm {
			a := m.Annotations
			if a[AnnotationName] != ref.Name || a[AnnotationVersion] != ref.Version || a[AnnotationPlatform] != p {
				return nil, refuse(CodeIdentity, fmt.Sprintf("the registry's manifest for %s (repository %s, tag %s) describes %s@%s%s",
					ref, repo, tag, a[AnnotationName], a[AnnotationVersion], platSuffix(a[AnnotationPlatform])),
					"republish the right archive under that name and version")
			}
		}
		data, err := o.layer(ctx, ref, repo, m)
		if err != nil {
			return nil, err
		}
		b := &Blob{Name: ref.Name, Version: ref.Version, Platform: p, Data: data, SHA256: m.SHA256}
		if m.Wasm {
			// Built as Resolve rebuilds it from the cache, so both are the same archive;
			// that is why the manifest's description is not carried into it.
			if b.Archive, err = WasmToolArchive(ref.Name, ref.Version, data); err != nil {
				return nil, fmt.Errorf("artifact %s: the wasm component of repository %s read as a tool: %w", ref, repo, err)
			}
		}
		return b, nil
	}
	return nil, o.notFound(ctx, ref, repo, plain)
}

// manifestAt fetches and decodes the manifest tag names in repo; nil, nil when there is
// none.
func (o *OCI) manifestAt(ctx context.Context, ref Ref, repo, tag string) (*ociManifest, error) {
	data, err := o.manifestBytes(ctx, ref, repo, tag)
	if data == nil || err != nil {
		return nil, err
	}
	m, err := decodeOCIManifest(data)
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			c := *e
			c.Msg = fmt.Sprintf("artifact %s: repository %s, tag %s: %s", ref, repo, tag, e.Msg)
			return nil, &c
		}
		return nil, err
	}
	return m, nil
}

// manifestBytes fetches the manifest tag names in repo, at most one byte over the cap;
// nil, nil when there is none.
func (o *OCI) manifestBytes(ctx context.Context, ref Ref, repo, tag string) ([]byte, error) {
	data, err := o.get(ctx, repo, "manifests", tag, ocispec.MediaTypeImageManifest, maxOCIManifestBytes)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, o.remoteErr(ctx, err, fmt.Sprintf("fetching the manifest of %s (repository %s, tag %s)", ref, repo, tag))
	}
	if data == nil {
		data = []byte{} // an empty answer is a manifest decodeOCIManifest refuses
	}
	return data, nil
}

// layer fetches m's layer as raw bytes, at most its stated size plus one, and checks
// them against its digest itself, so that a mismatch names both digests.
func (o *OCI) layer(ctx context.Context, ref Ref, repo string, m *ociManifest) ([]byte, error) {
	data, err := o.get(ctx, repo, "blobs", "sha256:"+m.SHA256, "", m.Size)
	if isNotFound(err) {
		return nil, refuse(CodeRemoteProtocol, fmt.Sprintf("artifact %s: repository %s names layer sha256:%s in its manifest but does not hold it", ref, repo, m.SHA256),
			"publish the artifact again")
	}
	if err != nil {
		return nil, o.remoteErr(ctx, err, fmt.Sprintf("fetching the layer of %s (repository %s)", ref, repo))
	}
	fix := "the registry copy is damaged or was altered: publish the artifact again from a trusted build"
	if int64(len(data)) > m.Size {
		return nil, refuse(CodeHashMismatch, fmt.Sprintf("artifact %s: repository %s sends more than the %d bytes its manifest states for layer sha256:%s", ref, repo, m.Size, m.SHA256), fix)
	}
	if got := sha.Hex(data); got != m.SHA256 {
		return nil, refuse(CodeHashMismatch, fmt.Sprintf("artifact %s: repository %s states layer sha256 %s, but the %d bytes received hash to sha256 %s", ref, repo, m.SHA256, len(data), got), fix)
	}
	return data, nil
}

// get GETs /v2/<repo>/<kind>/<reference> and returns at most limit+1 bytes of the body;
// an answer other than 200 is an *errcode.ErrorResponse.
func (o *OCI) get(ctx context.Context, repo, kind, reference, accept string, limit int64) ([]byte, error) {
	ctx = auth.AppendRepositoryScope(ctx, orasreg.Reference{Registry: o.host, Repository: repo}, auth.ActionPull)
	scheme := "https"
	if o.src.PlainHTTP {
		scheme = "http"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+o.host+"/v2/"+repo+"/"+kind+"/"+reference, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &errcode.ErrorResponse{Method: req.Method, URL: req.URL, StatusCode: resp.StatusCode}
		var body struct {
			Errors errcode.Errors `json:"errors"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body) == nil {
			e.Errors = body.Errors
		}
		return nil, e
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit+1))
}

// isNotFound says whether err is a registry's 404.
func isNotFound(err error) bool {
	var e *errcode.ErrorResponse
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// remoteErr turns a failed request into the refusal a user reads: 401 and 403 are
// credentials (E-REG-084), no connection, a timeout, 429 and 5xx the registry being
// down (E-REG-083), anything else a malformed answer (E-REG-085). The end of ctx is
// returned as it is.
func (o *OCI) remoteErr(ctx context.Context, err error, doing string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	down := func() error {
		return refuseWrap(err, CodeRemoteDown, fmt.Sprintf("registry %s cannot be reached or failed while %s", o.src.Spec, doing),
			"check that the registry runs and its address is right, then try again")
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return refuseWrap(err, CodeRemoteAuth, fmt.Sprintf("registry %s refused the credentials (HTTP %d) while %s; they come from %s", o.src.Spec, resp.StatusCode, doing, o.creds),
				"give the gateway a username and password or a token with access in the capsule app's registry_auth; for the commands (and as the gateway's fallback) run `docker login "+o.host+"`, whose Docker credential config is read ($DOCKER_CONFIG/config.json, else ~/.docker/config.json)")
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			return down()
		}
		return refuseWrap(err, CodeRemoteProtocol, fmt.Sprintf("registry %s answered HTTP %d while %s", o.src.Spec, resp.StatusCode, doing), "check the registry URL and that it serves the OCI distribution API")
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return refuseWrap(err, CodeRemoteAuth, fmt.Sprintf("registry %s asks for credentials while %s, and there are none: %s", o.src.Spec, doing, o.creds),
			"give a username and password or a token, else run `docker login "+o.host+"`")
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return down()
	}
	return refuseWrap(err, CodeRemoteProtocol, fmt.Sprintf("registry %s gave an answer this release cannot read while %s", o.src.Spec, doing), "check the registry URL and that it serves the OCI distribution API")
}

// notFound explains a failed Fetch from the repository's tags: which versions, or which
// platforms, exist.
func (o *OCI) notFound(ctx context.Context, ref Ref, repo, plain string) error {
	tags, err := o.tags(ctx, ref.Name)
	if err != nil {
		return err
	}
	var vers, plats []string
	for _, tag := range tags {
		v, p, ok := splitOCITag(tag)
		if p != "" && strings.TrimSuffix(tag, "-"+p) == plain {
			plats = append(plats, p)
		}
		if ok && !slices.Contains(vers, v) {
			vers = append(vers, v)
		}
	}
	if len(plats) > 0 {
		sortPlatforms(plats)
		want := ref.Platform
		if want == "" {
			want = "any platform"
		}
		return refuse(CodeNoVariant, fmt.Sprintf("artifact %s: no build for %s in repository %s; it is published only for %s", ref, want, repo, strings.Join(plats, ", ")),
			"run on one of those platforms, or publish a build for this one")
	}
	if len(vers) == 0 {
		return refuse(CodeNotFound, fmt.Sprintf("artifact %s: registry %s has no repository %s, or no tags in it", ref, o.src.Spec, repo),
			"check the name, or publish it with `caddy capsule publish`")
	}
	sort.Slice(vers, func(i, j int) bool { return naturalLess(vers[i], vers[j]) })
	return refuse(CodeNotFound, fmt.Sprintf("artifact %s: repository %s has no tag %s (its tags read as versions %s; a '_' in a tag is read as '+')", ref, repo, plain, strings.Join(vers, ", ")),
		"use one of the published versions, or publish this one")
}

func sortPlatforms(ps []string) {
	all := Platforms()
	sort.Slice(ps, func(i, j int) bool { return slices.Index(all, ps[i]) < slices.Index(all, ps[j]) })
}

var errEnough = errors.New("enough")

// tags lists at most ociListTags tags of artifact name's repository; none if it does not
// exist.
func (o *OCI) tags(ctx context.Context, name string) ([]string, error) {
	r, err := o.repository(name)
	if err != nil {
		return nil, err
	}
	var out []string
	err = r.Tags(ctx, "", func(tags []string) error {
		for _, t := range tags {
			if len(out) == ociListTags {
				return errEnough
			}
			out = append(out, t)
		}
		return nil
	})
	switch {
	case err == nil || errors.Is(err, errEnough):
		return out, nil
	case isNotFound(err):
		return nil, nil
	}
	return nil, o.remoteErr(ctx, err, "listing the tags of repository "+o.repoName(name))
}

// Publish adds an archive (`caddy capsule publish`): opened with every hardening rule
// first, platform required for native tools and refused otherwise, as Local.Publish. An
// existing tag holding the same layer is success without change; a different one is
// refused (E-REG-035). Else the layer, the empty config and the manifest are pushed and
// tagged.
func (o *OCI) Publish(ctx context.Context, data []byte, platform string) (*Blob, error) {
	a, err := openForPublish(ctx, data, platform)
	if err != nil {
		return nil, err
	}
	m := a.Manifest()
	id := m.Name + "@" + m.Version
	tag, err := ociTag(m.Name, m.Version, platform)
	if err != nil {
		return nil, err
	}
	sum := sha.Hex(data)
	blob := &Blob{Name: m.Name, Version: m.Version, Platform: platform, Data: data, SHA256: sum}
	ref := Ref{Name: m.Name, Version: m.Version, Platform: platform}
	repoName := o.repoName(m.Name)
	raw, err := o.manifestBytes(ctx, ref, repoName, tag)
	if err != nil {
		return nil, err
	}
	var old *ociManifest
	if raw != nil {
		if old, err = decodeOCIManifest(raw); err != nil {
			return nil, refuseWrap(err, CodeConflict, fmt.Sprintf("artifact %s%s: tag %s of repository %s already holds a manifest that is not an artifact", id, platSuffixOf(platform), tag, repoName),
				"published versions never change: bump the version in murmur.yaml and publish again")
		}
	}
	switch {
	case old != nil && old.Wasm:
		return nil, refuse(CodeConflict, fmt.Sprintf("artifact %s%s: tag %s of repository %s already holds a wasm component with sha256 %s; the archive given has sha256 %s", id, platSuffixOf(platform), tag, repoName, old.SHA256, sum),
			"published versions never change: bump the version in murmur.yaml and publish again")
	case old != nil && (old.Annotations[AnnotationName] != m.Name || old.Annotations[AnnotationVersion] != m.Version || old.Annotations[AnnotationPlatform] != platform):
		an := old.Annotations
		return nil, refuse(CodeOCITag, fmt.Sprintf("artifact %s%s: its tag %s in repository %s already holds %s@%s%s, whose version is written as the same tag", id, platSuffixOf(platform), tag, repoName, an[AnnotationName], an[AnnotationVersion], platSuffixOf(an[AnnotationPlatform])),
			"choose a version that does not read as another one once '+' is written '_' and -<platform> is appended")
	case old != nil && old.SHA256 != sum:
		return nil, refuse(CodeConflict, fmt.Sprintf("artifact %s%s is already published in repository %s (tag %s) with sha256 %s; the archive given has sha256 %s", id, platSuffixOf(platform), repoName, tag, old.SHA256, sum),
			"published versions never change: bump the version in murmur.yaml and publish again")
	case old != nil:
		return blob, nil
	}
	if err := o.push(ctx, m, platform, tag, data, sum); err != nil {
		return nil, err
	}
	return blob, nil
}

// push pushes the layer and the empty config unless the repository has them, then the
// manifest under tag.
func (o *OCI) push(ctx context.Context, m *manifest.ArtifactManifest, platform, tag string, data []byte, sum string) error {
	repo, err := o.repository(m.Name)
	if err != nil {
		return err
	}
	doing := fmt.Sprintf("publishing %s@%s%s to repository %s", m.Name, m.Version, platSuffixOf(platform), o.repoName(m.Name))
	layer := ocispec.Descriptor{MediaType: OCILayerMediaType, Digest: digest.Digest("sha256:" + sum), Size: int64(len(data)),
		Annotations: map[string]string{ocispec.AnnotationTitle: fileBase(m.Name, m.Version, platform) + ".mur.zip"}}
	config := ocispec.DescriptorEmptyJSON
	config.Data = nil // the manifest stays plain; the blob is pushed
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{layer, data}, {config, []byte("{}")}} {
		have, err := repo.Exists(ctx, b.desc)
		if err != nil {
			return o.remoteErr(ctx, err, doing)
		}
		if !have {
			if err := repo.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
				return o.remoteErr(ctx, err, doing)
			}
		}
	}
	ann := map[string]string{
		AnnotationName:    m.Name,
		AnnotationVersion: m.Version,
		AnnotationRuntime: string(m.Runtime),
	}
	ann[AnnotationImplementation] = m.Implementation
	if m.Runtime == manifest.RoleSkill {
		ann[AnnotationImplementation] = "static"
	}
	if platform != "" {
		ann[AnnotationPlatform] = platform
	}
	if m.Description != "" {
		ann[ocispec.AnnotationDescription] = m.Description
	}
	if len(m.Tags) > 0 {
		ann[AnnotationTags] = strings.Join(m.Tags, ",")
	}
	man := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, ArtifactType: OCIArtifactType,
		Config: config, Layers: []ocispec.Descriptor{layer}, Annotations: ann}
	mb, err := json.Marshal(man)
	if err != nil {
		return refuseWrap(err, CodeRemoteProtocol, "cannot encode the manifest of "+m.Name+"@"+m.Version, "report this as a bug")
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	if err := repo.PushReference(ctx, desc, bytes.NewReader(mb), tag); err != nil {
		return o.remoteErr(ctx, err, doing)
	}
	return nil
}

// List lists every version of every artifact under Base, from the manifests'
// annotations (a plain wasm component's version from its tag, '_' read as '+'), by
// name then version in natural order. The work is bounded: at most 1000 repositories
// under Base, found in at most 100 000 catalog entries (/v2/_catalog, which registries
// such as Docker Hub do not serve), and 1000 tags each; a manifest that cannot be read
// as an artifact is left out.
func (o *OCI) List(ctx context.Context) ([]Listing, error) {
	reg, err := remote.NewRegistry(o.host)
	if err != nil {
		return nil, refuseWrap(err, CodeRemote, fmt.Sprintf("registry %s: %q is not a registry host", o.src.Spec, o.host), "check the registry URL")
	}
	reg.Client, reg.PlainHTTP, reg.RepositoryListPageSize = o.client, o.src.PlainHTTP, ociCatalogPage
	prefix := o.path + "/"
	var names []string
	pages := 0
	err = reg.Repositories(ctx, "", func(repos []string) error {
		for _, r := range repos {
			if name, ok := strings.CutPrefix(r, prefix); ok && manifest.ValidName(name) {
				if names = append(names, name); len(names) == ociListRepos {
					return errEnough
				}
			}
		}
		if pages++; pages == ociCatalogMax {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, o.remoteErr(ctx, err, "listing its repositories (/v2/_catalog)")
	}
	sort.Strings(names)
	var out []Listing
	for _, name := range names {
		ls, err := o.listRepo(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// listRepo lists the versions of artifact name from its tags' manifests.
func (o *OCI) listRepo(ctx context.Context, name string) ([]Listing, error) {
	tags, err := o.tags(ctx, name)
	if err != nil {
		return nil, err
	}
	repo := o.repoName(name)
	byVersion := map[string]*Listing{}
	for _, tag := range tags {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := o.get(ctx, repo, "manifests", tag, ocispec.MediaTypeImageManifest, maxOCIManifestBytes)
		if isNotFound(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, o.remoteErr(ctx, err, fmt.Sprintf("reading the manifest of repository %s, tag %s", repo, tag))
		}
		m, err := decodeOCIManifest(data)
		if err != nil {
			continue
		}
		a := m.Annotations
		var li Listing
		platform := ""
		if m.Wasm {
			v, p, ok := splitOCITag(tag)
			if !ok || p != "" {
				continue
			}
			li = Listing{Name: name, Version: v, Implementation: manifest.ImplWasm, Role: manifest.RoleTool, Description: a[ocispec.AnnotationDescription]}
		} else {
			platform = a[AnnotationPlatform]
			if a[AnnotationName] != name || (platform != "" && !ValidPlatform(platform)) {
				continue
			}
			if want, err := ociTag(name, a[AnnotationVersion], platform); err != nil || want != tag {
				continue // Fetch would refuse it
			}
			li = Listing{Name: name, Version: a[AnnotationVersion], Implementation: a[AnnotationImplementation], Role: manifest.Role(a[AnnotationRuntime]),
				Description: a[ocispec.AnnotationDescription]}
			for _, t := range strings.Split(a[AnnotationTags], ",") {
				if t = strings.TrimSpace(t); t != "" {
					li.Tags = append(li.Tags, t)
				}
			}
		}
		have := byVersion[li.Version]
		switch {
		case have == nil:
			byVersion[li.Version] = &li
		case platform == "": // the platform-independent build describes the version
			li.Platforms = have.Platforms
			*have = li
		}
		if platform != "" && !slices.Contains(byVersion[li.Version].Platforms, platform) {
			byVersion[li.Version].Platforms = append(byVersion[li.Version].Platforms, platform)
		}
	}
	var out []Listing
	for _, li := range byVersion {
		sortPlatforms(li.Platforms)
		out = append(out, *li)
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Version, out[j].Version) })
	return out, nil
}
