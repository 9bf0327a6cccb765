package registry

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// NexusServer serves a local registry over Nexus's protocol (docs/operators.md
// "Registries"), so that Murmur's tools and Nexus clients publish to, fetch from and
// list it. It answers under any path prefix: a request is routed by what its path ends
// with (…/v1/artifacts, …/v1/artifacts/{name}/{version}).
//
// Publishing needs PublishToken; with none set, uploads are refused. Reading needs
// ReadToken, or PublishToken, when ReadToken is set, and is open otherwise. Unlike
// Local.Publish, a name, version and platform already published are refused even with
// the same bytes, as Nexus does.
type NexusServer struct {
	Local *Local
	// PublishToken is the bearer token uploads must carry; "" turns publishing off.
	PublishToken string
	// ReadToken is the bearer token fetches and listings must carry; "" leaves them open.
	ReadToken string
	// MaxBytes caps an upload; 0 is MaxArchiveFileBytes, also the most it may be.
	MaxBytes int64
	// OnPublish, when set, is told of every publication.
	OnPublish func(*Blob)
	// OnError, when set, is told of every failure answered with a 5xx status, whose
	// details (file paths) the answer leaves out.
	OnError func(r *http.Request, err error)
}

// nexusItemOut is one item of GET /v1/artifacts as NexusServer writes it.
type nexusItemOut struct {
	Name            string      `json:"name"`
	Version         string      `json:"version"`
	Runtime         string      `json:"runtime"`
	ArtifactRuntime string      `json:"artifact_runtime"`
	Platforms       [][2]string `json:"platforms"`
	Description     *string     `json:"description"`
	Tags            []string    `json:"tags"`
	// SHA256 is our addition to Nexus's listing: the platform-independent file's
	// sha256, which a runtime pull checks its bytes against (docs/operators.md).
	SHA256 string `json:"sha256,omitempty"`
}

// ServeHTTP answers one request of Nexus's protocol.
func (s *NexusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(r.URL.Path, "/")
	n := len(segs)
	// The item form first: its path also ends as a collection would under a prefix
	// ending in /v1/artifacts.
	switch {
	case n >= 4 && segs[n-4] == "v1" && segs[n-3] == "artifacts":
		if r.Method != http.MethodGet {
			s.methodNotAllowed(w, "GET")
			return
		}
		if !s.mayRead(w, r) {
			return
		}
		s.fetch(w, r, segs[n-2], segs[n-1])
	case n >= 2 && segs[n-2] == "v1" && segs[n-1] == "artifacts":
		switch r.Method {
		case http.MethodGet:
			if s.mayRead(w, r) {
				s.list(w, r)
			}
		case http.MethodPost:
			if s.mayPublish(w, r) {
				s.publish(w, r)
			}
		default:
			s.methodNotAllowed(w, "GET, POST")
		}
	default:
		writeNexusError(w, http.StatusNotFound, "", "not found: this registry serves GET and POST …/v1/artifacts and GET …/v1/artifacts/{name}/{version}")
	}
}

func (s *NexusServer) methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeNexusError(w, http.StatusMethodNotAllowed, "", "method not allowed: use "+allow)
}

// bearerIs reports whether r carries token as its bearer token, comparing in constant
// time (the hashes, so that not even the length shows).
func bearerIs(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func nexusUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="capsule_registry"`)
	writeNexusJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
}

// mayRead answers 401 unless r may read: ReadToken unset, or r carries it or the
// publish token.
func (s *NexusServer) mayRead(w http.ResponseWriter, r *http.Request) bool {
	if s.ReadToken == "" || bearerIs(r, s.ReadToken) || bearerIs(r, s.PublishToken) {
		return true
	}
	nexusUnauthorized(w)
	return false
}

// mayPublish answers 403 when publishing is off and 401 unless r carries the publish
// token, before a byte of the body is read.
func (s *NexusServer) mayPublish(w http.ResponseWriter, r *http.Request) bool {
	if s.PublishToken == "" {
		writeNexusError(w, http.StatusForbidden, CodeRemoteAuth, "publishing is off: this registry has no publish token configured")
		return false
	}
	if !bearerIs(r, s.PublishToken) {
		nexusUnauthorized(w)
		return false
	}
	return true
}

// publish is POST /v1/artifacts?name=&version=&runtime=&platform=.
func (s *NexusServer) publish(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, version, rt, platform := q.Get("name"), q.Get("version"), q.Get("runtime"), q.Get("platform")
	switch version {
	case "latest", "stable", "edge":
		// Nexus's exact answer, which its clients match.
		writeNexusJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "reserved artifact version '" + version + "' is not allowed"})
		return
	}
	switch {
	case !manifest.ValidName(name):
		writeNexusError(w, http.StatusBadRequest, CodeArtifactName, fmt.Sprintf("invalid artifact name %q: [a-z0-9-], 1–100 characters, no leading or trailing '-'", name))
		return
	case manifest.CheckVersion(version) != "":
		writeNexusError(w, http.StatusBadRequest, CodeArtifactVersion, fmt.Sprintf("invalid artifact version %q: %s", version, manifest.CheckVersion(version)))
		return
	case rt != manifest.ImplWasm && rt != manifest.ImplNative && rt != nexusStatic:
		writeNexusError(w, http.StatusBadRequest, CodeArtifactKind, fmt.Sprintf("invalid runtime %q: want wasm, native or static", rt))
		return
	case platform != "" && !ValidPlatform(platform):
		writeNexusError(w, http.StatusBadRequest, CodePlatform, fmt.Sprintf("invalid platform %q: want one of %s", platform, strings.Join(Platforms(), ", ")))
		return
	}
	limit := int64(MaxArchiveFileBytes)
	if s.MaxBytes > 0 && s.MaxBytes < limit {
		limit = s.MaxBytes
	}
	tooLarge := fmt.Sprintf("the upload is over the %d-byte limit of an archive", limit)
	if r.ContentLength > limit {
		writeNexusError(w, http.StatusRequestEntityTooLarge, CodeDeclaredSize, tooLarge)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeNexusError(w, http.StatusRequestEntityTooLarge, CodeDeclaredSize, tooLarge)
			return
		}
		writeNexusError(w, http.StatusBadRequest, CodeCorrupt, "the upload could not be read to its end: "+err.Error()+"; send the whole archive again")
		return
	}
	a, err := OpenArchive(data)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	m := a.Manifest()
	if m.Name != name || m.Version != version || nexusRuntime(m) != rt {
		writeNexusError(w, http.StatusBadRequest, CodeIdentity, fmt.Sprintf("the query names %s@%s (%s), but the archive holds %s@%s (%s)", name, version, rt, m.Name, m.Version, nexusRuntime(m)))
		return
	}
	if err := checkPublishPlatform(m, platform); err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	blob, err := s.Local.publish(r.Context(), a, data, platform, true)
	if err != nil {
		status := http.StatusBadRequest
		switch errs.Code(err) {
		case CodeConflict:
			status = http.StatusConflict
		case CodeStore, "":
			status = http.StatusInternalServerError
		}
		s.fail(w, r, status, err)
		return
	}
	if s.OnPublish != nil {
		s.OnPublish(blob)
	}
	writeNexusJSON(w, http.StatusCreated, map[string]string{"artifact_id": blob.Name + "@" + blob.Version, "sha256": blob.SHA256})
}

// fetch is GET /v1/artifacts/{name}/{version}[?platform=].
func (s *NexusServer) fetch(w http.ResponseWriter, r *http.Request, name, version string) {
	ref := Ref{Name: name, Version: version, Platform: r.URL.Query().Get("platform")}
	b, err := s.Local.Fetch(r.Context(), ref)
	if err != nil {
		id := "'" + name + "@" + version + "'"
		switch errs.Code(err) {
		case CodeArtifactName, CodeArtifactVersion, CodePlatform:
			s.fail(w, r, http.StatusBadRequest, err)
		case CodeNoVariant:
			if ref.Platform == "" {
				writeNexusError(w, http.StatusNotFound, CodeNoVariant, fmt.Sprintf("artifact %s has no platform-independent file: ask for a platform (published for %s)", id, strings.Join(s.Local.platformsOf(name, version), ", ")))
				return
			}
			writeNexusError(w, http.StatusNotFound, CodeNoVariant, fmt.Sprintf("artifact %s has no variant for platform '%s'", id, ref.Platform))
		case CodeNotFound:
			msg := "artifact " + id + " not found"
			if vers, _ := s.Local.Versions(name); len(vers) > 0 {
				msg += "; published versions: " + strings.Join(vers, ", ")
			}
			writeNexusError(w, http.StatusNotFound, CodeNotFound, msg)
		default:
			s.fail(w, r, http.StatusInternalServerError, err)
		}
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(HeaderSHA256, b.SHA256)
	h.Set("Content-Length", strconv.Itoa(len(b.Data)))
	if b.Platform != "" {
		h.Set(HeaderPlatform, b.Platform)
	}
	w.WriteHeader(http.StatusOK)
	w.Write(b.Data)
}

// list is GET /v1/artifacts.
func (s *NexusServer) list(w http.ResponseWriter, r *http.Request) {
	ls, err := s.Local.List(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	out := make([]nexusItemOut, 0, len(ls))
	for _, l := range ls {
		if l.Role == "" || l.Implementation == "" {
			var ok bool
			if l, ok = s.fillFromArchive(r.Context(), l); !ok {
				continue // unreadable: listing it would break every client's parse
			}
		}
		it := nexusItemOut{Name: l.Name, Version: l.Version, Runtime: l.Implementation, ArtifactRuntime: string(l.Role),
			Platforms: [][2]string{}, Tags: l.Tags, SHA256: l.SHA256}
		if it.Tags == nil {
			it.Tags = []string{}
		}
		if l.Description != "" {
			it.Description = &l.Description
		}
		for _, p := range l.Platforms {
			goos, arch, _ := strings.Cut(p, "-")
			it.Platforms = append(it.Platforms, [2]string{goos, arch})
		}
		out = append(out, it)
	}
	writeNexusJSON(w, http.StatusOK, out)
}

// fillFromArchive completes a listing whose metadata could not be read from one of its
// archives.
func (s *NexusServer) fillFromArchive(ctx context.Context, l Listing) (Listing, bool) {
	for _, p := range append([]string{""}, l.Platforms...) {
		b, err := s.Local.Fetch(ctx, Ref{Name: l.Name, Version: l.Version, Platform: p})
		if err != nil || b.Platform != p {
			continue
		}
		a, err := openedArchives.open(b.Data, b.SHA256)
		if err != nil {
			continue
		}
		m := a.Manifest()
		l.Role, l.Implementation, l.Description, l.Tags = m.Runtime, nexusRuntime(m), m.Description, m.Tags
		return l, true
	}
	return l, false
}

// fail answers err with status: its code and text, or for a 5xx only its code, the
// details going to OnError.
func (s *NexusServer) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	code := errs.Code(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusServiceUnavailable
	}
	if status >= 500 {
		if s.OnError != nil {
			s.OnError(r, err)
		}
		writeNexusError(w, status, code, "the registry failed to serve this request; its log has the details")
		return
	}
	writeNexusError(w, status, code, err.Error())
}

func writeNexusError(w http.ResponseWriter, status int, code, msg string) {
	body := map[string]string{"error": msg}
	if code != "" {
		body["code"] = code
	}
	writeNexusJSON(w, status, body)
}

func writeNexusJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"cannot encode the answer"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}
