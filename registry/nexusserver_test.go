package registry

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"github.com/capsulegate/capsulegate/internal/digest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// send makes one request of the Nexus protocol by hand, as a client other than ours
// would, and returns the status, headers and body.
func send(t *testing.T, method, url, token string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header, data
}

// jsonError reads a JSON error answer's text and code.
func jsonError(t *testing.T, body []byte) (msg, code string) {
	t.Helper()
	var e struct{ Error, Code string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("not a JSON error: %s", body)
	}
	return e.Error, e.Code
}

// publishedRig is a rig under /reg holding echo@1.0.0 (wasm), git-helper@0.3.1 for
// linux-x86_64 and darwin-aarch64, and greeting@1.0.0 (a skill).
func publishedRig(t *testing.T, readToken string) (*nexusRig, map[string][]byte) {
	t.Helper()
	rig := newNexusRig(t, "/reg", testPublishToken, readToken)
	echoDir := filepath.Join(t.TempDir(), "echo")
	writeTree(t, echoDir, map[string]string{"murmur.yaml": "name: echo\nversion: 1.0.0\nruntime: tool\ndescription: echoes\ntags: [text, demo]\n", "echo.wasm": wasmMagic})
	echo, _, err := Pack(echoDir)
	must(t, err)
	arts := map[string][]byte{
		"echo":   echo,
		"linux":  packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\nlinux")}),
		"darwin": packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\ndarwin")}),
		"skill":  packSpec(t, artifactSpec{"greeting", "1.0.0", "skill", "", []byte("# Greet\n")}),
	}
	l := rig.srv.Local
	mustPublish(t, l, arts["echo"], "")
	mustPublish(t, l, arts["linux"], PlatformLinuxX86_64)
	mustPublish(t, l, arts["darwin"], PlatformDarwinAarch64)
	mustPublish(t, l, arts["skill"], "")
	return rig, arts
}

// TestNexusServerRoutes: whatever the prefix, the server routes by the path's end;
// anything else is a JSON 404, a wrong method a 405 with Allow.
func TestNexusServerRoutes(t *testing.T) {
	rig, _ := publishedRig(t, "")
	host := rig.http.URL
	for _, tt := range []struct {
		method, path string
		status       int
		allow        string
		code         string // the JSON error's code
		says         string // in the JSON error's text
	}{
		{method: "GET", path: "/v1/artifacts", status: 200},
		{method: "GET", path: "/deep/prefix/v1/artifacts", status: 200},
		{method: "GET", path: "/reg/v1/artifacts/echo/1.0.0", status: 200},
		{method: "GET", path: "/v1/artifacts/v1/artifacts", status: 404, code: CodeNotFound, says: "artifact 'v1@artifacts' not found"},
		{method: "GET", path: "/v1/artifacts/", status: 404},
		{method: "GET", path: "/v1/artifacts/echo", status: 404},
		{method: "GET", path: "/v1/artifacts/echo/1.0.0/more", status: 404},
		{method: "GET", path: "/v1/artifact", status: 404},
		{method: "GET", path: "/", status: 404},
		{method: "PUT", path: "/reg/v1/artifacts", status: 405, allow: "GET, POST"},
		{method: "DELETE", path: "/reg/v1/artifacts/echo/1.0.0", status: 405, allow: "GET"},
		{method: "POST", path: "/reg/v1/artifacts/echo/1.0.0", status: 405, allow: "GET"},
		{method: "GET", path: "/reg/v1/artifacts/Echo/1.0.0", status: 400, code: CodeArtifactName},
		{method: "GET", path: "/reg/v1/artifacts/echo/1.0.0?platform=linux-amd64", status: 400, code: CodePlatform},
		{method: "GET", path: "/reg/v1/artifacts/echo/9.9.9", status: 404, code: CodeNotFound, says: "artifact 'echo@9.9.9' not found; published versions: 1.0.0"},
		{method: "GET", path: "/reg/v1/artifacts/nothing/1.0.0", status: 404, code: CodeNotFound, says: "artifact 'nothing@1.0.0' not found"},
		{method: "GET", path: "/reg/v1/artifacts/git-helper/0.3.1?platform=linux-aarch64", status: 404, code: CodeNoVariant,
			says: "artifact 'git-helper@0.3.1' has no variant for platform 'linux-aarch64'"},
		{method: "GET", path: "/reg/v1/artifacts/git-helper/0.3.1", status: 404, code: CodeNoVariant, says: "linux-x86_64, darwin-aarch64"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, h, body := send(t, tt.method, host+tt.path, "", nil)
			if status != tt.status || h.Get("Allow") != tt.allow {
				t.Fatalf("status %d Allow %q, want %d %q: %s", status, h.Get("Allow"), tt.status, tt.allow, body)
			}
			if status == 200 {
				return
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			msg, code := jsonError(t, body)
			if code != tt.code || !strings.Contains(msg, tt.says) {
				t.Fatalf("error %q code %q, want %q saying %q", msg, code, tt.code, tt.says)
			}
			if strings.Contains(msg, rig.root) {
				t.Errorf("the answer shows the registry's folder: %s", msg)
			}
		})
	}
}

// TestNexusServerFetch: the bytes come with their type, length and sha256, and a
// platform-specific file with its platform.
func TestNexusServerFetch(t *testing.T) {
	rig, arts := publishedRig(t, "")
	for _, tt := range []struct {
		path, art, platform string
	}{
		{"/reg/v1/artifacts/echo/1.0.0", "echo", ""},
		{"/reg/v1/artifacts/echo/1.0.0?platform=darwin-aarch64", "echo", ""},
		{"/reg/v1/artifacts/git-helper/0.3.1?platform=linux-x86_64", "linux", PlatformLinuxX86_64},
		{"/reg/v1/artifacts/git-helper/0.3.1?platform=darwin-aarch64", "darwin", PlatformDarwinAarch64},
		{"/reg/v1/artifacts/greeting/1.0.0", "skill", ""},
	} {
		t.Run(tt.path, func(t *testing.T) {
			status, h, body := send(t, "GET", rig.http.URL+tt.path, "", nil)
			want := arts[tt.art]
			if status != 200 || !bytes.Equal(body, want) {
				t.Fatalf("status %d, %d bytes; want the %s archive", status, len(body), tt.art)
			}
			got := map[string]string{"Content-Type": h.Get("Content-Type"), HeaderSHA256: h.Get(HeaderSHA256),
				"Content-Length": h.Get("Content-Length"), HeaderPlatform: h.Get(HeaderPlatform)}
			wantH := map[string]string{"Content-Type": "application/octet-stream", HeaderSHA256: digest.Hex(want),
				"Content-Length": strconv.Itoa(len(want)), HeaderPlatform: tt.platform}
			for k, v := range wantH {
				if got[k] != v {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestNexusServerList: the listing is Nexus's JSON: platforms as [os, arch] pairs,
// description null when empty, tags [] when none; an artifact whose metadata went
// missing is listed from its archive.
func TestNexusServerList(t *testing.T) {
	rig, arts := publishedRig(t, "")
	// sha256 is ours: the platform-independent file's, which runtime pulls check against.
	want := `[{"name":"echo","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool","platforms":[],"description":"echoes","tags":["text","demo"],"sha256":"` + digest.Hex(arts["echo"]) + `"},` +
		`{"name":"git-helper","version":"0.3.1","runtime":"native","artifact_runtime":"tool","platforms":[["linux","x86_64"],["darwin","aarch64"]],"description":null,"tags":[]},` +
		`{"name":"greeting","version":"1.0.0","runtime":"static","artifact_runtime":"skill","platforms":[],"description":null,"tags":[],"sha256":"` + digest.Hex(arts["skill"]) + `"}]`
	status, h, body := send(t, "GET", rig.http.URL+"/reg/v1/artifacts", "", nil)
	if status != 200 || string(body) != want || h.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s\n%s\nwant\n%s", status, h.Get("Content-Type"), body, want)
	}
	for _, p := range []string{PlatformLinuxX86_64, PlatformDarwinAarch64} {
		must(t, os.Remove(filepath.Join(rig.root, "git-helper", "0.3.1", "git-helper-0.3.1-"+p+".meta.json")))
	}
	if _, _, again := send(t, "GET", rig.http.URL+"/reg/v1/artifacts", "", nil); string(again) != want {
		t.Fatalf("without metadata:\n%s\nwant\n%s", again, want)
	}
	empty := newNexusRig(t, "", "", "")
	if status, _, body := send(t, "GET", empty.http.URL+"/v1/artifacts", "", nil); status != 200 || string(body) != "[]" {
		t.Fatalf("empty registry lists %d %s", status, body)
	}
}

// trapBody records whether anything read it.
type trapBody struct{ read bool }

func (b *trapBody) Read(p []byte) (int, error) { b.read = true; return 0, io.EOF }
func (b *trapBody) Close() error               { return nil }

// TestNexusServerRefusesBeforeReading: auth, publishing turned off, the query's
// mistakes and a declared oversize are answered without reading a byte of the body.
func TestNexusServerRefusesBeforeReading(t *testing.T) {
	root := filepath.Join(t.TempDir(), "registry")
	on := &NexusServer{Local: NewLocal(root), PublishToken: testPublishToken, ReadToken: testReadToken, MaxBytes: 1 << 20}
	off := &NexusServer{Local: NewLocal(root)}
	const q = "/v1/artifacts?name=echo&version=1.0.0&runtime=wasm"
	for _, tt := range []struct {
		name   string
		srv    *NexusServer
		method string
		target string
		auth   string
		length int64
		status int
		body   string // exact, when set
		says   string
	}{
		{name: "publishing off", srv: off, method: "POST", target: q, auth: "Bearer " + testPublishToken, status: 403, says: "publishing is off"},
		{name: "no key", srv: on, method: "POST", target: q, status: 401, body: `{"error":"unauthorized"}`},
		{name: "wrong key", srv: on, method: "POST", target: q, auth: "Bearer " + testPublishToken + "x", status: 401, body: `{"error":"unauthorized"}`},
		{name: "read key", srv: on, method: "POST", target: q, auth: "Bearer " + testReadToken, status: 401},
		{name: "basic auth", srv: on, method: "POST", target: q, auth: "Basic " + testPublishToken, status: 401},
		{name: "reserved version", srv: on, method: "POST", target: "/v1/artifacts?name=echo&version=latest&runtime=wasm", auth: "Bearer " + testPublishToken,
			status: 422, body: `{"error":"reserved artifact version 'latest' is not allowed"}`},
		{name: "reserved version edge", srv: on, method: "POST", target: "/v1/artifacts?name=echo&version=edge&runtime=wasm", auth: "bearer " + testPublishToken,
			status: 422, body: `{"error":"reserved artifact version 'edge' is not allowed"}`},
		{name: "bad name", srv: on, method: "POST", target: "/v1/artifacts?name=Echo&version=1.0.0&runtime=wasm", auth: "Bearer " + testPublishToken, status: 400, says: "invalid artifact name"},
		{name: "no version", srv: on, method: "POST", target: "/v1/artifacts?name=echo&runtime=wasm", auth: "Bearer " + testPublishToken, status: 400, says: "invalid artifact version"},
		{name: "bad runtime", srv: on, method: "POST", target: "/v1/artifacts?name=echo&version=1.0.0&runtime=jvm", auth: "Bearer " + testPublishToken, status: 400, says: "invalid runtime"},
		{name: "bad platform", srv: on, method: "POST", target: q + "&platform=windows-x86_64", auth: "Bearer " + testPublishToken, status: 400, says: "invalid platform"},
		{name: "declared too large", srv: on, method: "POST", target: q, auth: "Bearer " + testPublishToken, length: 1<<20 + 1, status: 413, says: "over the 1048576-byte limit"},
		{name: "read without a key", srv: on, method: "GET", target: "/v1/artifacts", status: 401, body: `{"error":"unauthorized"}`},
		{name: "fetch with a wrong key", srv: on, method: "GET", target: "/x/v1/artifacts/echo/1.0.0", auth: "Bearer nope", status: 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			trap := &trapBody{}
			req := httptest.NewRequest(tt.method, tt.target, nil)
			req.Body, req.ContentLength = trap, tt.length
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			tt.srv.ServeHTTP(rec, req)
			if rec.Code != tt.status || trap.read {
				t.Fatalf("status %d (body read: %v), want %d: %s", rec.Code, trap.read, tt.status, rec.Body)
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Fatalf("body %s, want exactly %s", rec.Body, tt.body)
			}
			if tt.says != "" && !strings.Contains(rec.Body.String(), tt.says) {
				t.Fatalf("body %s does not say %q", rec.Body, tt.says)
			}
			if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") != `Bearer realm="capsule_registry"` {
				t.Errorf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatal("a refused request created the registry folder")
	}
}

// TestNexusServerRefusesUploads: hostile, oversized, mislabelled and duplicate uploads
// are refused with the registry's code and leave the registry folder exactly as it was.
func TestNexusServerRefusesUploads(t *testing.T) {
	rig := newNexusRig(t, "/reg", testPublishToken, "", func(s *NexusServer) { s.MaxBytes = 1 << 20 })
	echo := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	native := packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\n")})
	post := func(query string, body io.Reader) (int, []byte) {
		status, _, data := send(t, "POST", rig.base+"/v1/artifacts?"+query, testPublishToken, body)
		return status, data
	}
	if status, body := post("name=echo&version=1.0.0&runtime=wasm", bytes.NewReader(echo)); status != 201 ||
		string(body) != `{"artifact_id":"echo@1.0.0","sha256":"`+digest.Hex(echo)+`"}` {
		t.Fatalf("first publish: %d %s", status, body)
	}
	bomb, err := bomb600()
	must(t, err)
	zipBomb := makeZip(manifestEnt, wasmEnt, zent{name: "zeros.bin", data: string(bomb), raw: true, method: zip.Deflate, usize: 1 << 10})
	before := snapshot(t, rig.root)
	for _, tt := range []struct {
		name, query string
		body        io.Reader
		status      int
		code        string
	}{
		{"dotdot entry", "name=echo-tool&version=1.0.0&runtime=wasm", bytes.NewReader(makeZip(manifestEnt, wasmEnt, zent{name: "../x", data: "x"})), 400, CodeDotDot},
		{"absolute entry", "name=echo-tool&version=1.0.0&runtime=wasm", bytes.NewReader(makeZip(manifestEnt, wasmEnt, zent{name: "/etc/x", data: "x"})), 400, CodeAbsoluteName},
		{"symlink entry", "name=echo-tool&version=1.0.0&runtime=wasm", bytes.NewReader(makeZip(manifestEnt, wasmEnt, zent{name: "l", data: "/etc/passwd", mode: os.ModeSymlink | 0o777})), 400, CodeSymlink},
		{"zip bomb", "name=echo-tool&version=1.0.0&runtime=wasm", bytes.NewReader(zipBomb), 400, CodeActualSize},
		{"not a zip", "name=echo-tool&version=1.0.0&runtime=wasm", strings.NewReader("not a zip"), 400, CodeNotZip},
		// A reader of unknown length is sent chunked: only reading finds it too large.
		{"too large, chunked", "name=echo-tool&version=1.0.0&runtime=wasm", io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), strings.NewReader("x")), 413, CodeDeclaredSize},
		{"name differs", "name=other&version=1.0.0&runtime=wasm", bytes.NewReader(echo), 400, CodeIdentity},
		{"version differs", "name=echo&version=1.0.1&runtime=wasm", bytes.NewReader(echo), 400, CodeIdentity},
		{"runtime differs", "name=echo&version=1.0.0&runtime=static", bytes.NewReader(echo), 400, CodeIdentity},
		{"native without platform", "name=git-helper&version=0.3.1&runtime=native", bytes.NewReader(native), 400, CodePlatformNeeded},
		{"platform for wasm", "name=echo&version=1.0.0&runtime=wasm&platform=linux-x86_64", bytes.NewReader(echo), 400, CodePlatformExtra},
		{"duplicate, same bytes", "name=echo&version=1.0.0&runtime=wasm", bytes.NewReader(echo), 409, CodeConflict},
		{"duplicate, other bytes", "name=echo&version=1.0.0&runtime=wasm",
			bytes.NewReader(packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "other"...)})), 409, CodeConflict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(tt.query, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if _, code := jsonError(t, body); code != tt.code {
				t.Fatalf("code %q, want %q: %s", code, tt.code, body)
			}
			if snapshot(t, rig.root) != before {
				t.Fatal("a refused upload changed the registry folder")
			}
		})
	}
}

// TestNexusServerConcurrentDuplicates: of uploads of one new version racing each other,
// exactly one is published.
func TestNexusServerConcurrentDuplicates(t *testing.T) {
	rig := newNexusRig(t, "", testPublishToken, "")
	data := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), "POST", rig.base+"/v1/artifacts?name=echo&version=1.0.0&runtime=wasm", bytes.NewReader(data))
			req.Header.Set("Authorization", "Bearer "+testPublishToken)
			resp, err := rig.http.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[201] != 1 || count[409] != n-1 {
		t.Fatalf("statuses %v: want one 201 and %d 409", statuses, n-1)
	}
}
