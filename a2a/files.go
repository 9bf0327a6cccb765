package a2a

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A file larger than InlineFileBytes, in a task's message or artifacts, is kept as a blob
// of the task (the store's PutBlob; in memory without a store) rather than in its records,
// and clients read it through a gateway URL: <endpoint>files/<task id>/<blob id>, signed
// with a key of the blob's and valid for FileURLTTL from when it was rendered, served to
// the task's owner only, and gone with the task (docs/reference/a2a.md "Parts").

// InlineFileBytes is the largest file a task's records hold inline.
const InlineFileBytes = 64 << 10

// FileURLTTL is how long a file URL stays valid after a response named it.
const FileURLTTL = time.Hour

// newSecret returns n random bytes.
func newSecret(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on the platforms Go supports
	return b
}

// offloadLocked returns parts with every file over InlineFileBytes kept as a blob of t
// (t.mu held): the part keeps the blob's id, its key and the file's size, not its bytes.
// The blobs' writes are queued before the task's next record, so once that is durable
// they are too. parts itself is not changed.
func (t *task) offloadLocked(parts []Part) []Part {
	if !slices.ContainsFunc(parts, func(p Part) bool { return len(p.Bytes) > InlineFileBytes }) {
		return parts
	}
	out := slices.Clone(parts)
	for i, p := range out {
		if len(p.Bytes) <= InlineFileBytes {
			continue
		}
		id := "blb_" + hex.EncodeToString(newSecret(16))
		t.blobWrites = append(t.blobWrites, t.store.putBlob(t, id, p.Bytes))
		out[i].Blob, out[i].BlobKey, out[i].Size, out[i].Bytes = id, newSecret(32), int64(len(p.Bytes)), nil
	}
	return out
}

// hasBlob reports whether any of parts is kept as a blob.
func hasBlob(parts []Part) bool {
	return slices.ContainsFunc(parts, func(p Part) bool { return p.Blob != "" })
}

// fetchBlobs returns parts with the bytes of their blobs read back, for the executor.
func (h *Handler) fetchBlobs(t *task, parts []Part) ([]Part, error) {
	if !hasBlob(parts) {
		return parts, nil
	}
	// The blobs were written with the task's events before it started: a store reads
	// only what is committed, so wait for those writes.
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	if err := last.wait(); err != nil {
		return nil, err
	}
	out := slices.Clone(parts)
	for i, p := range out {
		if p.Blob == "" {
			continue
		}
		b, ok, err := h.store.blob(t, p.Blob)
		if err != nil || !ok {
			return nil, fmt.Errorf("a2a: reading file %s of task %s: found %v, %v", p.Blob, t.id, ok, err)
		}
		out[i].Bytes, out[i].Blob, out[i].BlobKey, out[i].Size = b, "", nil, 0
	}
	return out, nil
}

// fileSignature signs the URL of blob of task until expires.
func fileSignature(key []byte, taskID, blob string, expires int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\n%s\n%d", taskID, blob, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// linker renders the blob parts of a task as file URLs below the endpoint the reader
// reached (or the task's, for a push notification), valid until expires. The endpoint is
// worked out only when a part needs it: most responses hold none.
type linker struct {
	base    func() string
	expires int64
}

func newLinker(base string, now time.Time) linker {
	return linker{base: func() string { return base }, expires: now.Add(FileURLTTL).Unix()}
}

// parts returns parts with every blob part as a file by URL; parts itself when none is.
func (l linker) parts(taskID string, parts []Part) []Part {
	if !hasBlob(parts) {
		return parts
	}
	out := slices.Clone(parts)
	for i, p := range out {
		if p.Blob == "" {
			continue
		}
		if p.URL != "" {
			// A file the client named by URL, fetched and kept: shown as the client sent it.
			out[i] = Part{Kind: KindFile, Name: p.Name, MediaType: p.MediaType, URL: p.URL}
			continue
		}
		u := strings.TrimSuffix(l.base(), "/") + "/files/" + url.PathEscape(taskID) + "/" + p.Blob +
			"?expires=" + strconv.FormatInt(l.expires, 10) + "&sig=" + fileSignature(p.BlobKey, taskID, p.Blob, l.expires)
		out[i] = Part{Kind: KindFile, Name: p.Name, MediaType: p.MediaType, URL: u}
	}
	return out
}

func (l linker) message(taskID string, m message) message {
	m.Parts = l.parts(taskID, m.Parts)
	return m
}

// snapshot returns s with its blob parts linked; s itself when it has none.
func (l linker) snapshot(s *snapshot) *snapshot {
	if s == nil || !s.hasBlobs() {
		return s
	}
	c := *s
	c.Artifacts = slices.Clone(s.Artifacts)
	for i := range c.Artifacts {
		c.Artifacts[i].Parts = l.parts(s.ID, c.Artifacts[i].Parts)
	}
	c.History = slices.Clone(s.History)
	for i := range c.History {
		c.History[i] = l.message(s.ID, c.History[i])
	}
	if c.Status.Msg != nil {
		m := l.message(s.ID, *c.Status.Msg)
		c.Status.Msg = &m
	}
	return &c
}

// event returns e with its blob parts linked.
func (l linker) event(e event, taskID string) event {
	switch e.kind {
	case evTask:
		e.task = l.snapshot(e.task)
	case evArtifact:
		e.art.Parts = l.parts(taskID, e.art.Parts)
	case evStatus, evLagged:
		if e.status.Msg != nil {
			m := l.message(taskID, *e.status.Msg)
			e.status.Msg = &m
		}
	}
	return e
}

func (s *snapshot) hasBlobs() bool {
	return slices.ContainsFunc(s.Artifacts, func(a artifact) bool { return hasBlob(a.Parts) }) ||
		slices.ContainsFunc(s.History, func(m message) bool { return hasBlob(m.Parts) }) ||
		s.Status.Msg != nil && hasBlob(s.Status.Msg.Parts)
}

// linksFor is the linker of a response to r.
func (h *Handler) linksFor(r *http.Request) linker {
	base := sync.OnceValue(func() string {
		cfg, _ := h.configFor(r)
		return h.endpoint(r, cfg)
	})
	return linker{base: base, expires: time.Now().Add(FileURLTTL).Unix()}
}

// matchFile recognises a file URL's path: …/files/<task id>/<blob id>.
func matchFile(p string) (taskID, blob string, ok bool) {
	rest, blob, ok := cutLast(p, "/")
	if !ok || !strings.HasPrefix(blob, "blb_") {
		return "", "", false
	}
	rest, taskID, ok = cutLast(rest, "/")
	if !ok || !strings.HasSuffix(rest, "/files") && rest != "files" {
		return "", "", false
	}
	taskID, err := url.PathUnescape(taskID)
	return taskID, blob, err == nil && taskID != ""
}

// serveFile answers a file URL: the blob's bytes to the task's owner while the URL's
// signature holds and has not expired; 404 for anything else a stranger could learn from
// (an unknown task or blob, another principal's task, a bad signature), 410 for an
// expired URL.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, taskID, blob string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "a file is read with GET", http.StatusMethodNotAllowed)
		return
	}
	_, who, ok := h.authenticate(w, r, "a task's files are served to its owner: send the token that created the task (Authorization: Bearer <token>)", false)
	if !ok {
		return
	}
	notFound := func() {
		http.Error(w, "no such file: the task, or its file, is gone or not yours, or the URL is not one this gateway gave", http.StatusNotFound)
	}
	q := r.URL.Query()
	expires, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil {
		notFound()
		return
	}
	t := h.lookup(taskID, who)
	if t == nil {
		notFound()
		return
	}
	p, found := t.blobPart(blob)
	if !found || !hmac.Equal([]byte(q.Get("sig")), []byte(fileSignature(p.BlobKey, taskID, blob, expires))) {
		notFound()
		return
	}
	if time.Now().Unix() > expires {
		http.Error(w, "this file URL has expired: read the task again (tasks/get) for a fresh one", http.StatusGone)
		return
	}
	data, ok, err := h.store.blob(t, blob)
	switch {
	case err != nil:
		http.Error(w, "the task store cannot read the file: "+err.Error(), http.StatusServiceUnavailable)
		return
	case !ok:
		notFound()
		return
	}
	w.Header().Set("Content-Type", firstNonEmpty(p.MediaType, "application/octet-stream"))
	if p.Name != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": p.Name}))
	}
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// blobPart finds the part of t that keeps blob.
func (t *task) blobPart(blob string) (Part, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	find := func(ps []Part) (Part, bool) {
		for _, p := range ps {
			if p.Blob == blob {
				return p, true
			}
		}
		return Part{}, false
	}
	for _, a := range t.artifacts {
		if p, ok := find(a.Parts); ok {
			return p, true
		}
	}
	for _, m := range t.history {
		if p, ok := find(m.Parts); ok {
			return p, true
		}
	}
	return Part{}, false
}
