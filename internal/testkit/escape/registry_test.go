package escape

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/registry"
)

// Registry rows send hostile requests to the registry a gateway serves
// (`capsule_registry`, registry.NexusServer on a local folder) with a publish token and a
// read token. Sentinels: the registry's folder must hold exactly what it held before a
// refused upload, nothing may appear beside it, and no answer may carry the secret kept
// in a file beside the folder.

const (
	publishToken = "pub-token-escape-71"
	readToken    = "read-token-escape-19"
	regMax       = 64 << 10
)

type registryFixture struct {
	url, root, base string
	client          *http.Client
	tool            []byte // a valid archive of tool "good" 1.0.0, already published
}

func (s *suite) registryFix(t *testing.T) *registryFixture {
	if s.reg != nil {
		return s.reg
	}
	base, err := filepath.EvalSymlinks(s.top.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &registryFixture{base: base, root: filepath.Join(base, "registry")}
	os.WriteFile(filepath.Join(base, "secret.txt"), []byte(secret), 0o644)
	srv := httptest.NewServer(&registry.NexusServer{Local: registry.NewLocal(f.root), PublishToken: publishToken, ReadToken: readToken, MaxBytes: regMax})
	s.top.Cleanup(srv.Close)
	f.url, f.client = srv.URL, srv.Client()
	f.tool = toolArchive(t, "good", "1.0.0", "good")
	if status, body := f.upload(t, publishToken, "good", "1.0.0", "wasm", bytes.NewReader(f.tool), -1); status != http.StatusCreated {
		t.Fatalf("publishing the good tool: HTTP %d %s", status, body)
	}
	s.reg = f
	return f
}

// toolArchive is a .mur.zip of a wasm tool named name@version, its manifest saying
// manifestName.
func toolArchive(t *testing.T, name, version, manifestName string) []byte {
	return buildZip(t, nil,
		zent{name: "murmur.yaml", data: fmt.Sprintf("name: %s\nversion: %s\nruntime: tool\nimplementation: wasm\ndescription: escape suite tool\n", manifestName, version)},
		zent{name: name + ".wasm", data: "\x00asm\x01\x00\x00\x00"})
}

// upload POSTs body as name@version (runtime rt) with token ("" for none); length -1
// sends the length, -2 leaves it out (chunked).
func (f *registryFixture) upload(t *testing.T, token, name, version, rt string, body io.Reader, length int64) (int, string) {
	u := f.url + "/v1/artifacts?name=" + name + "&version=" + version + "&runtime=" + rt
	req, err := http.NewRequest(http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if length == -2 {
		req.ContentLength = -1
		req.Body = io.NopCloser(body)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return f.send(t, req)
}

func (f *registryFixture) send(t *testing.T, req *http.Request) (int, string) {
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// snapshot is every path under root with its size: what a refused request must leave.
func snapshot(root string) string {
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, _ := d.Info()
		if info != nil && !d.IsDir() {
			fmt.Fprintf(&b, "%s %d\n", rel, info.Size())
		} else {
			fmt.Fprintf(&b, "%s/\n", rel)
		}
		return nil
	})
	return b.String()
}

var regCode = regexp.MustCompile(`E-REG-\d{3}`)

// registryAttack runs req against the fixture and classifies the answer as "HTTP
// <status>" and its E-REG code; the registry's folder must be unchanged, nothing may
// appear beside it, and the secret must not come back.
func registryAttack(req func(t *testing.T, f *registryFixture) (int, string)) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.registryFix(t)
		before, beside := snapshot(f.root), len(entries(f.base))
		status, body := req(t, f)
		class := fmt.Sprintf("HTTP %d", status)
		if code := regCode.FindString(body); code != "" {
			class += " " + code
		}
		var escaped []string
		if after := snapshot(f.root); after != before {
			escaped = append(escaped, "the registry's folder changed")
		}
		if n := len(entries(f.base)); n != beside {
			escaped = append(escaped, "something appeared beside the registry's folder")
		}
		if l := leaked(body); l != "" {
			escaped = append(escaped, l)
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

func entries(dir string) []os.DirEntry {
	e, _ := os.ReadDir(dir)
	return e
}

func regGet(f *registryFixture, t *testing.T, path, token string) (int, string) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, f.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return f.send(t, req)
}

func registryRows() []row {
	up := func(token, name, version, rt string, archive func(t *testing.T, f *registryFixture) []byte) func(*testing.T, *registryFixture) (int, string) {
		return func(t *testing.T, f *registryFixture) (int, string) {
			return f.upload(t, token, name, version, rt, bytes.NewReader(archive(t, f)), -1)
		}
	}
	good := func(name, version string) func(*testing.T, *registryFixture) []byte {
		return func(t *testing.T, _ *registryFixture) []byte { return toolArchive(t, name, version, name) }
	}
	cases := []struct {
		attack, want string
		req          func(*testing.T, *registryFixture) (int, string)
	}{
		{"an upload without a token", "HTTP 401", up("", "evil", "1.0.0", "wasm", good("evil", "1.0.0"))},
		{"an upload with the read token", "HTTP 401", up(readToken, "evil", "1.0.0", "wasm", good("evil", "1.0.0"))},
		{"an upload with a prefix of the publish token", "HTTP 401", up(publishToken[:len(publishToken)-1], "evil", "1.0.0", "wasm", good("evil", "1.0.0"))},
		{"an upload named ../../escape", "HTTP 400 " + registry.CodeArtifactName, up(publishToken, "../../escape", "1.0.0", "wasm", good("evil", "1.0.0"))},
		{"an upload versioned ../../1.0.0", "HTTP 400 " + registry.CodeArtifactVersion, up(publishToken, "evil", "../../1.0.0", "wasm", good("evil", "1.0.0"))},
		{"an upload whose archive holds another artifact than the query names", "HTTP 400 " + registry.CodeIdentity, up(publishToken, "evil", "1.0.0", "wasm", good("other", "1.0.0"))},
		{"an upload whose archive climbs out (zip slip)", "HTTP 400 E-REG-004", up(publishToken, "evil", "1.0.0", "wasm", func(t *testing.T, _ *registryFixture) []byte {
			return buildZip(t, nil, zent{name: "murmur.yaml", data: "name: evil\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\n"},
				zent{name: "../../../escaped.txt", data: "out"})
		})},
		{"an upload that is no zip", "HTTP 400 E-REG-001", up(publishToken, "evil", "1.0.0", "wasm", func(*testing.T, *registryFixture) []byte { return []byte("not a zip " + secret) })},
		{"an upload over the size cap, its length declared", "HTTP 413 " + registry.CodeDeclaredSize, up(publishToken, "evil", "1.0.0", "wasm", func(*testing.T, *registryFixture) []byte {
			return bytes.Repeat([]byte("x"), regMax+1)
		})},
		{"an upload over the size cap, chunked", "HTTP 413 " + registry.CodeDeclaredSize, func(t *testing.T, f *registryFixture) (int, string) {
			return f.upload(t, publishToken, "evil", "1.0.0", "wasm", bytes.NewReader(bytes.Repeat([]byte("x"), regMax+1)), -2)
		}},
		{"an upload replacing a published version with other bytes", "HTTP 409 " + registry.CodeConflict, up(publishToken, "good", "1.0.0", "wasm", func(t *testing.T, _ *registryFixture) []byte {
			return buildZip(t, nil, zent{name: "murmur.yaml", data: "name: good\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\ndescription: replaced\n"},
				zent{name: "good.wasm", data: "\x00asm\x01\x00\x00\x00replaced"})
		})},
		{"an upload to a reserved version (latest)", "HTTP 422", up(publishToken, "evil", "latest", "wasm", good("evil", "1.0.0"))},
		{"a listing without the read token", "HTTP 401", func(t *testing.T, f *registryFixture) (int, string) { return regGet(f, t, "/v1/artifacts", "") }},
		{"a fetch climbing out of the folder (..%2F)", "HTTP 404", func(t *testing.T, f *registryFixture) (int, string) {
			return regGet(f, t, "/v1/artifacts/..%2F..%2Fsecret.txt/1.0.0", readToken)
		}},
		{"a fetch of a version climbing out", "HTTP 404", func(t *testing.T, f *registryFixture) (int, string) {
			return regGet(f, t, "/v1/artifacts/good/..%2F..%2F..%2Fsecret.txt", readToken)
		}},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("RG-%02d", i+1), surface: Registry, attack: c.attack, want: c.want, run: registryAttack(c.req)})
	}
	return rows
}

// Registry client rows: a hostile Nexus registry on loopback answers the gateway's
// fetch of an artifact with tampered, lying or hostile bytes. The client must refuse each
// before the bytes are used: a Blob handed back is the escape.

// hostileNexus serves fetch answers made by answer and returns the registry's client.
func hostileNexus(t *testing.T, answer func(w http.ResponseWriter)) *registry.Nexus {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w) }))
	t.Cleanup(srv.Close)
	src, err := registry.ParseSource("nexus+" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return registry.NewNexus(src, registry.OpenOptions{Getenv: func(string) string { return "" }})
}

// registryClientAttack fetches good@1.0.0 from a registry answering as answer makes it.
func registryClientAttack(answer func(t *testing.T) func(w http.ResponseWriter)) func(*testing.T, *suite) outcome {
	return func(t *testing.T, _ *suite) outcome {
		n := hostileNexus(t, answer(t))
		blob, err := n.Fetch(context.Background(), registry.Ref{Name: "good", Version: "1.0.0"})
		if err == nil {
			return outcome{class: "accepted", escaped: fmt.Sprintf("the client accepted %d bytes (sha256 %s)", len(blob.Data), blob.SHA256)}
		}
		return outcome{class: codeClass(err)}
	}
}

func registryClientRows() []row {
	serve := func(data []byte, stated string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			if stated != "" {
				w.Header().Set(registry.HeaderSHA256, stated)
			}
			w.Write(data)
		}
	}
	cases := []struct {
		attack, want string
		answer       func(t *testing.T) func(w http.ResponseWriter)
	}{
		{"a blob tampered after its digest was stated", registry.CodeHashMismatch, func(t *testing.T) func(http.ResponseWriter) {
			good := toolArchive(t, "good", "1.0.0", "good")
			bad := append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^0xff)
			return serve(bad, sha256Hex(good))
		}},
		{"a blob with no digest stated", registry.CodeRemoteProtocol, func(t *testing.T) func(http.ResponseWriter) {
			return serve(toolArchive(t, "good", "1.0.0", "good"), "")
		}},
		{"a blob stating a digest that is not one", registry.CodeRemoteProtocol, func(t *testing.T) func(http.ResponseWriter) {
			return serve(toolArchive(t, "good", "1.0.0", "good"), "../../etc/passwd")
		}},
		{"a blob whose archive climbs out (zip slip), its digest honest", "E-REG-004", func(t *testing.T) func(http.ResponseWriter) {
			z := buildZip(t, nil, zent{name: "murmur.yaml", data: "name: good\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\n"}, zent{name: "../../../escaped", data: "x"})
			return serve(z, sha256Hex(z))
		}},
		{"a blob declaring more than an archive may hold", registry.CodeDeclaredSize, func(t *testing.T) func(http.ResponseWriter) {
			return func(w http.ResponseWriter) {
				w.Header().Set(registry.HeaderSHA256, strings.Repeat("0", 64))
				w.Header().Set("Content-Length", fmt.Sprint(int64(registry.MaxArchiveFileBytes)+1))
				w.WriteHeader(http.StatusOK)
			}
		}},
		{"a blob said to be for another platform than the archive is", registry.CodeRemoteProtocol, func(t *testing.T) func(http.ResponseWriter) {
			good := toolArchive(t, "good", "1.0.0", "good")
			return func(w http.ResponseWriter) {
				w.Header().Set(registry.HeaderSHA256, sha256Hex(good))
				w.Header().Set(registry.HeaderPlatform, "linux-x86_64")
				w.Write(good)
			}
		}},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("RC-%02d", i+1), surface: Registry, attack: "a registry's fetch answer: " + c.attack, want: c.want,
			run: registryClientAttack(c.answer)})
	}
	rows = append(rows, ociClientRows(len(rows)+1)...)
	return append(rows, listingRows(len(rows)+1)...)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hostileOCI serves an OCI registry on loopback whose one repository, escape/good,
// answers its tag 1.0.0 with the manifest manifest makes (given the layer's honest
// digest and size) and every blob with layer; it returns the registry's client.
func hostileOCI(t *testing.T, layer []byte, manifest func(digest string, size int) string) *registry.OCI {
	sum := sha256Hex(layer)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.Write([]byte("{}"))
		case r.URL.Path == "/v2/escape/good/manifests/1.0.0":
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Write([]byte(manifest(sum, len(layer))))
		case strings.HasPrefix(r.URL.Path, "/v2/escape/good/blobs/"):
			w.Write(layer)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"not here"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	src, err := registry.ParseSource("oci+http://" + strings.TrimPrefix(srv.URL, "http://") + "/escape")
	if err != nil {
		t.Fatal(err)
	}
	o, err := registry.NewOCI(src, registry.OpenOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ociManifest is an artifact manifest of one layer, described by annotations name and
// version; layers, when given, replaces the layer list's JSON.
func ociManifest(digest string, size int64, name, version, layers string) string {
	if layers == "" {
		layers = fmt.Sprintf(`[{"mediaType":%q,"digest":"sha256:%s","size":%d}]`, registry.OCILayerMediaType, digest, size)
	}
	return fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":%q,`+
		`"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},`+
		`"layers":%s,"annotations":{%q:%q,%q:%q}}`, registry.OCIArtifactType, layers, registry.AnnotationName, name, registry.AnnotationVersion, version)
}

// ociClientRows: a hostile OCI registry's manifests and layers for a fetch of
// good@1.0.0, each refused before the bytes are used.
func ociClientRows(first int) []row {
	cases := []struct {
		attack, want string
		layer        func(t *testing.T, good []byte) []byte
		manifest     func(digest string, size int) string
	}{
		{"an OCI layer tampered after its manifest stated its digest", registry.CodeHashMismatch,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string {
				return ociManifest(strings.Repeat("ab", 32), int64(size), "good", "1.0.0", "")
			}},
		{"an OCI layer longer than its manifest states", registry.CodeHashMismatch,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string { return ociManifest(digest, int64(size-1), "good", "1.0.0", "") }},
		{"an OCI manifest describing another artifact", registry.CodeIdentity,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string { return ociManifest(digest, int64(size), "evil", "6.6.6", "") }},
		{"an OCI manifest of two layers", registry.CodeRemoteProtocol,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string {
				l := fmt.Sprintf(`{"mediaType":%q,"digest":"sha256:%s","size":%d}`, registry.OCILayerMediaType, digest, size)
				return ociManifest(digest, int64(size), "good", "1.0.0", "["+l+","+l+"]")
			}},
		{"an OCI layer digest climbing a path", registry.CodeRemoteProtocol,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string {
				return ociManifest(digest, int64(size), "good", "1.0.0", fmt.Sprintf(`[{"mediaType":%q,"digest":"sha256:../../../etc/passwd","size":%d}]`, registry.OCILayerMediaType, size))
			}},
		{"an OCI layer declaring more than an archive may hold", registry.CodeRemoteProtocol,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string {
				return ociManifest(digest, int64(registry.MaxArchiveFileBytes)+1, "good", "1.0.0", "")
			}},
		{"an OCI manifest of 8 MiB", registry.CodeRemoteProtocol,
			func(t *testing.T, good []byte) []byte { return good },
			func(digest string, size int) string {
				return strings.Replace(ociManifest(digest, int64(size), "good", "1.0.0", ""), `"annotations":{`, `"annotations":{"pad":"`+strings.Repeat("x", 8<<20)+`",`, 1)
			}},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("RC-%02d", first+i), surface: Registry, attack: "a registry's fetch answer: " + c.attack, want: c.want,
			run: func(t *testing.T, _ *suite) outcome {
				good := toolArchive(t, "good", "1.0.0", "good")
				o := hostileOCI(t, c.layer(t, good), c.manifest)
				blob, err := o.Fetch(context.Background(), registry.Ref{Name: "good", Version: "1.0.0"})
				if err == nil {
					return outcome{class: "accepted", escaped: fmt.Sprintf("the client accepted %d bytes (sha256 %s)", len(blob.Data), blob.SHA256)}
				}
				return outcome{class: codeClass(err)}
			}})
	}
	return rows
}

// listingRows: a hostile Nexus registry's listing naming paths, versions with slashes,
// platforms holding terminal escapes and names in capitals beside one honest item. The
// hostile items are left out; one listed is the escape.
func listingRows(first int) []row {
	items := []struct{ attack, item, name string }{
		{"a listing naming an artifact by a path", `{"name":"../../etc","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}`, "../../etc"},
		{"a listing whose version climbs a path", `{"name":"climb","version":"1.0.0/../../../x","runtime":"wasm","artifact_runtime":"tool"}`, "climb"},
		{"a listing whose platform holds a terminal escape", `{"name":"ansi","version":"1.0.0","runtime":"native","artifact_runtime":"tool","platforms":[["linux\u001b]0;pwned\u0007","x86_64"]]}`, "ansi"},
		{"a listing naming an artifact no manifest may (capitals, NUL)", `{"name":"Evil\u0000x","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}`, "Evil\x00x"},
	}
	var rows []row
	for i, c := range items {
		rows = append(rows, row{id: fmt.Sprintf("RC-%02d", first+i), surface: Registry, attack: c.attack, want: "left out",
			run: func(t *testing.T, _ *suite) outcome {
				listing := `[` + c.item + `,{"name":"good","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}]`
				n := hostileNexus(t, func(w http.ResponseWriter) { w.Write([]byte(listing)) })
				all, err := n.List(context.Background())
				if err != nil {
					return outcome{class: codeClass(err)}
				}
				class := "left out"
				if len(all) != 1 || all[0].Name != "good" {
					class = fmt.Sprintf("%d listed", len(all))
				}
				for _, l := range all {
					if l.Name == c.name {
						return outcome{class: class, escaped: fmt.Sprintf("the hostile item was listed: %+v", l)}
					}
				}
				return outcome{class: class}
			}})
	}
	return rows
}
