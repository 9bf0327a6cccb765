package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/capsulegate/capsulegate/internal/digest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testPublishToken = "publish-token-0123456789abcdef"
	testReadToken    = "read-token-0123456789abcdef"
)

// packSpec packs the artifact folder writeArtifactDir writes for s.
func packSpec(t *testing.T, s artifactSpec) []byte {
	t.Helper()
	data, _, err := Pack(writeArtifactDir(t, s))
	must(t, err)
	return data
}

// nexusRig is a NexusServer over a fresh registry folder, on 127.0.0.1, reached under
// prefix (the server routes by the path's end, whatever comes before).
type nexusRig struct {
	root string
	srv  *NexusServer
	http *httptest.Server
	base string // http://127.0.0.1:port<prefix>
}

func newNexusRig(t *testing.T, prefix, publishToken, readToken string, configure ...func(*NexusServer)) *nexusRig {
	t.Helper()
	root := filepath.Join(t.TempDir(), "registry")
	s := &NexusServer{Local: NewLocal(root), PublishToken: publishToken, ReadToken: readToken}
	s.OnError = func(r *http.Request, err error) { t.Logf("server error on %s: %v", r.URL, err) }
	for _, c := range configure {
		c(s)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &nexusRig{root: root, srv: s, http: hs, base: hs.URL + prefix}
}

// nexusAt is a Nexus client of base (http://127.0.0.1:port[/path]) holding token, opened
// the way the commands open one.
func nexusAt(t *testing.T, base, token string, client *http.Client) *Nexus {
	t.Helper()
	src, err := ParseSource("nexus+" + base)
	must(t, err)
	r, err := Open(src, OpenOptions{Auth: Auth{Token: token}, Getenv: func(string) string { return "" }, Client: client})
	must(t, err)
	return r.(*Nexus)
}

func (rig *nexusRig) client(t *testing.T, token string) *Nexus {
	return nexusAt(t, rig.base, token, rig.http.Client())
}

// TestNexusRoundTrip publishes wasm, native (two platforms, and a generic build beside
// one) and skill artifacts through the client to a NexusServer under a path prefix, then
// fetches them with and without a platform and lists them.
func TestNexusRoundTrip(t *testing.T) {
	ctx := context.Background()
	rig := newNexusRig(t, "/registry", testPublishToken, "")
	pub := rig.client(t, testPublishToken)
	anon := rig.client(t, "")

	echo := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	linux := packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\nlinux")})
	darwin := packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\ndarwin")})
	mixedWasm := packSpec(t, artifactSpec{"mixed", "2.0.0", "tool", "", append(wasmHeader, "mixed"...)})
	mixedLinux := packSpec(t, artifactSpec{"mixed", "2.0.0", "tool", "native", []byte("#!/bin/sh\nmixed")})
	skill := packSpec(t, artifactSpec{"greeting", "1.0.0", "skill", "", []byte("# Greet\n")})
	for _, p := range []struct {
		data     []byte
		platform string
	}{{echo, ""}, {linux, PlatformLinuxX86_64}, {darwin, PlatformDarwinAarch64}, {mixedWasm, ""}, {mixedLinux, PlatformLinuxX86_64}, {skill, ""}} {
		b, err := pub.Publish(ctx, p.data, p.platform)
		must(t, err)
		if b.Platform != p.platform || b.SHA256 != digest.Hex(p.data) || string(b.Data) != string(p.data) {
			t.Fatalf("publish answered %s@%s %q %s", b.Name, b.Version, b.Platform, b.SHA256)
		}
	}

	for _, tt := range []struct {
		ref      Ref
		want     []byte
		platform string // Blob.Platform
		code     string
	}{
		{ref: Ref{Name: "echo", Version: "1.0.0"}, want: echo},
		{ref: Ref{Name: "echo", Version: "1.0.0", Platform: PlatformLinuxX86_64}, want: echo},
		{ref: Ref{Name: "git-helper", Version: "0.3.1", Platform: PlatformLinuxX86_64}, want: linux, platform: PlatformLinuxX86_64},
		{ref: Ref{Name: "git-helper", Version: "0.3.1", Platform: PlatformDarwinAarch64}, want: darwin, platform: PlatformDarwinAarch64},
		{ref: Ref{Name: "git-helper", Version: "0.3.1", Platform: PlatformLinuxAarch64}, code: CodeNoVariant},
		{ref: Ref{Name: "git-helper", Version: "0.3.1"}, code: CodeNoVariant},
		{ref: Ref{Name: "mixed", Version: "2.0.0", Platform: PlatformLinuxX86_64}, want: mixedLinux, platform: PlatformLinuxX86_64},
		{ref: Ref{Name: "mixed", Version: "2.0.0", Platform: PlatformDarwinX86_64}, want: mixedWasm},
		{ref: Ref{Name: "mixed", Version: "2.0.0"}, want: mixedWasm},
		{ref: Ref{Name: "greeting", Version: "1.0.0", Platform: PlatformDarwinAarch64}, want: skill},
		{ref: Ref{Name: "echo", Version: "9.9.9"}, code: CodeNotFound},
		{ref: Ref{Name: "nothing", Version: "1.0.0"}, code: CodeNotFound},
		{ref: Ref{Name: "Bad", Version: "1.0.0"}, code: CodeArtifactName},
		{ref: Ref{Name: "echo", Version: "latest"}, code: CodeArtifactVersion},
	} {
		t.Run("fetch "+tt.ref.String(), func(t *testing.T) {
			b, err := anon.Fetch(ctx, tt.ref)
			if tt.code != "" {
				e := assertCode(t, err, tt.code)
				if tt.code != CodeArtifactName && tt.code != CodeArtifactVersion && !strings.Contains(e.Msg, rig.base) {
					t.Errorf("the refusal does not name the registry: %v", e)
				}
				return
			}
			must(t, err)
			if string(b.Data) != string(tt.want) || b.SHA256 != digest.Hex(tt.want) || b.Platform != tt.platform || b.Name != tt.ref.Name || b.Version != tt.ref.Version {
				t.Fatalf("fetched %s@%s platform %q sha256 %s; want platform %q sha256 %s", b.Name, b.Version, b.Platform, b.SHA256, tt.platform, digest.Hex(tt.want))
			}
		})
	}

	got, err := anon.List(ctx)
	must(t, err)
	want, err := rig.srv.Local.List(ctx)
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed\n%+v\nwant what the folder lists\n%+v", got, want)
	}
	if len(got) != 4 || got[1].Name != "git-helper" || strings.Join(got[1].Platforms, ",") != "linux-x86_64,darwin-aarch64" || got[2].Implementation != "static" {
		t.Fatalf("listing %+v", got)
	}
}

// TestNexusResolve verifies a capsule's lock through a Nexus registry serving the
// registry it was installed from: the same pins hold.
func TestNexusResolve(t *testing.T) {
	f := newFixture(t, "")
	_, _, err := f.install(t)
	must(t, err)
	hs := httptest.NewServer(&NexusServer{Local: f.reg})
	defer hs.Close()
	n := nexusAt(t, hs.URL, "", hs.Client())
	res, err := VerifyLock(context.Background(), f.load(t), Options{Registry: n, Platform: PlatformLinuxX86_64})
	must(t, err)
	if len(res.Artifacts) != 3 || res.Artifacts[0].Archive == nil {
		t.Fatalf("resolved %+v", res.Artifacts)
	}
}

// TestNexusPublishRefusals: a duplicate (same or other bytes), a missing or wrong key, and
// publishing turned off are refused with their codes, and leave the registry folder as
// it was; the key never shows in a message.
func TestNexusPublishRefusals(t *testing.T) {
	ctx := context.Background()
	rig := newNexusRig(t, "", testPublishToken, "")
	data := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	other := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "other"...)})
	fresh := packSpec(t, artifactSpec{"echo", "1.0.1", "tool", "", append(wasmHeader, "fresh"...)})
	_, err := rig.client(t, testPublishToken).Publish(ctx, data, "")
	must(t, err)
	off := newNexusRig(t, "", "", "")
	must(t, os.MkdirAll(off.root, 0o755)) // for snapshot

	for _, tt := range []struct {
		name   string
		rig    *nexusRig
		token  string
		data   []byte
		code   string
		secret string // must not appear in the message
	}{
		{"identical again", rig, testPublishToken, data, CodeConflict, testPublishToken},
		{"other bytes", rig, testPublishToken, other, CodeConflict, testPublishToken},
		{"no key", rig, "", fresh, CodeRemoteAuth, ""},
		{"wrong key", rig, "wrong-key-0123456789abcdef", fresh, CodeRemoteAuth, "wrong-key-0123456789abcdef"},
		{"read key", rig, testReadToken, fresh, CodeRemoteAuth, testReadToken},
		{"publishing off", off, testPublishToken, fresh, CodeRemoteAuth, testPublishToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(t, tt.rig.root)
			_, err := tt.rig.client(t, tt.token).Publish(ctx, tt.data, "")
			e := assertCode(t, err, tt.code)
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Fatalf("the message shows the key: %v", err)
			}
			if tt.code == CodeRemoteAuth && !strings.Contains(e.Fix, "NEXUS_API_KEY") {
				t.Errorf("the fix does not name NEXUS_API_KEY: %v", e)
			}
			if snapshot(t, tt.rig.root) != before {
				t.Fatal("a refused publish changed the registry folder")
			}
		})
	}
}

// TestNexusReadAuth: with a read token set, fetching and listing need it (or the
// publish token); without one, or with a wrong one, they are E-REG-084.
func TestNexusReadAuth(t *testing.T) {
	ctx := context.Background()
	rig := newNexusRig(t, "/r", testPublishToken, testReadToken)
	data := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	_, err := rig.client(t, testPublishToken).Publish(ctx, data, "")
	must(t, err)
	for _, tt := range []struct {
		token string
		ok    bool
	}{{testReadToken, true}, {testPublishToken, true}, {"", false}, {"wrong-key-0123456789abcdef", false}} {
		t.Run(fmt.Sprintf("token %q", tt.token), func(t *testing.T) {
			n := rig.client(t, tt.token)
			_, ferr := n.Fetch(ctx, Ref{Name: "echo", Version: "1.0.0"})
			_, lerr := n.List(ctx)
			for _, err := range []error{ferr, lerr} {
				if tt.ok {
					must(t, err)
					continue
				}
				assertCode(t, err, CodeRemoteAuth)
				if tt.token != "" && strings.Contains(err.Error(), tt.token) {
					t.Fatalf("the message shows the key: %v", err)
				}
			}
		})
	}
}

// TestNexusPublishRefusedLocally: what the client can know is wrong never reaches the
// registry.
func TestNexusPublishRefusedLocally(t *testing.T) {
	var requests atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer hs.Close()
	n := nexusAt(t, hs.URL, testPublishToken, hs.Client())
	native := packSpec(t, artifactSpec{"git-helper", "0.3.1", "tool", "native", []byte("#!/bin/sh\n")})
	wasm := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	for _, tt := range []struct {
		name, platform string
		data           []byte
		code           string
	}{
		{"dotdot entry", "", makeZip(manifestEnt, wasmEnt, zent{name: "../x", data: "x"}), CodeDotDot},
		{"not a zip", "", []byte("not a zip"), CodeNotZip},
		{"reserved version", "", makeZip(zent{name: "murmur.yaml", data: "name: x\nversion: latest\n"}, wasmEnt), "E-MAN-005"},
		{"native without platform", "", native, CodePlatformNeeded},
		{"wasm with platform", PlatformLinuxX86_64, wasm, CodePlatformExtra},
		{"unknown platform", "linux-amd64", native, CodePlatform},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := n.Publish(context.Background(), tt.data, tt.platform)
			assertCode(t, err, tt.code)
		})
	}
	if requests.Load() != 0 {
		t.Fatalf("%d requests reached the registry", requests.Load())
	}
}

// TestNexusToken: the key is Auth.Token, else $NEXUS_API_KEY; with neither, no
// Authorization header is sent.
func TestNexusToken(t *testing.T) {
	var got atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Values("Authorization"))
		w.Write([]byte("[]"))
	}))
	defer hs.Close()
	src, err := ParseSource("nexus+" + hs.URL)
	must(t, err)
	for _, tt := range []struct {
		name, token, env string
		want             []string
	}{
		{"auth wins", "from-auth", "from-env", []string{"Bearer from-auth"}},
		{"environment", "", "from-env", []string{"Bearer from-env"}},
		{"none", "", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNexus(src, OpenOptions{Auth: Auth{Token: tt.token}, Client: hs.Client(),
				Getenv: func(k string) string { return map[string]string{EnvNexusKey: tt.env}[k] }})
			_, err := n.List(context.Background())
			must(t, err)
			if h, _ := got.Load().([]string); !reflect.DeepEqual(h, tt.want) {
				t.Fatalf("Authorization %q, want %q", h, tt.want)
			}
		})
	}
	if n := NewNexus(src, OpenOptions{}); n.String() != "nexus+"+hs.URL {
		t.Errorf("String() = %q", n.String())
	}
}

// TestNexusAnswers: a hand-written registry's wrong answers get their codes.
func TestNexusAnswers(t *testing.T) {
	data := packSpec(t, artifactSpec{"echo", "1.0.0", "tool", "", append(wasmHeader, "echo"...)})
	sum := digest.Hex(data)
	other := strings.Repeat("ab", 32)
	serve := func(status int, header map[string]string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			for k, v := range header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	jsonErr := func(msg string) []byte { b, _ := json.Marshal(map[string]string{"error": msg}); return b }
	ref := Ref{Name: "echo", Version: "1.0.0", Platform: PlatformLinuxX86_64}
	for _, tt := range []struct {
		name    string
		op      string // fetch, list, publish
		handler http.HandlerFunc
		code    string
		says    []string // in the message
	}{
		{"fetch: good", "fetch", serve(200, map[string]string{HeaderSHA256: sum}, data), "", nil},
		{"fetch: header differs from the bytes", "fetch", serve(200, map[string]string{HeaderSHA256: other}, data), CodeHashMismatch,
			[]string{"echo@1.0.0", other, sum, "/v1/artifacts/echo/1.0.0"}},
		{"fetch: no header", "fetch", serve(200, nil, data), CodeRemoteProtocol, []string{HeaderSHA256}},
		{"fetch: upper-case header", "fetch", serve(200, map[string]string{HeaderSHA256: strings.ToUpper(sum)}, data), CodeRemoteProtocol, nil},
		{"fetch: short header", "fetch", serve(200, map[string]string{HeaderSHA256: sum[:63]}, data), CodeRemoteProtocol, nil},
		{"fetch: not an archive", "fetch", serve(200, map[string]string{HeaderSHA256: digest.Hex([]byte("junk"))}, []byte("junk")), CodeNotZip, nil},
		{"fetch: platform header disagrees", "fetch", serve(200, map[string]string{HeaderSHA256: sum, HeaderPlatform: PlatformLinuxX86_64}, data), CodeRemoteProtocol, []string{HeaderPlatform}},
		{"fetch: 500", "fetch", serve(500, nil, []byte("boom")), CodeRemoteDown, []string{"500", "boom"}},
		{"fetch: 503", "fetch", serve(503, nil, nil), CodeRemoteDown, nil},
		{"fetch: 401", "fetch", serve(401, nil, jsonErr("unauthorized")), CodeRemoteAuth, []string{"NEXUS_API_KEY"}},
		{"fetch: 403", "fetch", serve(403, nil, jsonErr("forbidden")), CodeRemoteAuth, nil},
		{"fetch: 404", "fetch", serve(404, nil, jsonErr("artifact 'echo@1.0.0' not found")), CodeNotFound, []string{"artifact 'echo@1.0.0' not found"}},
		{"fetch: 404 no variant", "fetch", serve(404, nil, jsonErr("artifact 'echo@1.0.0' has no variant for platform 'linux-x86_64'")), CodeNoVariant, []string{"linux-x86_64"}},
		{"fetch: 404 text cleaned", "fetch", serve(404, nil, []byte("gone\x1b[2J")), CodeNotFound, []string{"gone[2J"}},
		{"fetch: 418", "fetch", serve(418, nil, nil), CodeRemoteProtocol, []string{"418"}},
		{"list: good", "list", serve(200, nil, []byte(`[{"name":"echo","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}]`)), "", nil},
		{"list: item without runtime", "list", serve(200, nil, []byte(`[{"name":"echo","version":"1.0.0","artifact_runtime":"tool"}]`)), CodeRemoteProtocol, []string{"item 0", `"runtime"`}},
		{"list: not an array", "list", serve(200, nil, []byte(`{"items":[]}`)), CodeRemoteProtocol, nil},
		{"list: 500", "list", serve(500, nil, nil), CodeRemoteDown, nil},
		{"list: 404", "list", serve(404, nil, nil), CodeRemoteProtocol, nil},
		{"publish: good", "publish", serve(201, nil, []byte(`{"artifact_id":"echo@1.0.0","sha256":"`+sum+`"}`)), "", nil},
		{"publish: stated sha256 differs", "publish", serve(201, nil, []byte(`{"artifact_id":"echo@1.0.0","sha256":"`+other+`"}`)), CodeRemoteProtocol, []string{other, sum}},
		{"publish: no sha256", "publish", serve(201, nil, []byte(`{"artifact_id":"echo@1.0.0"}`)), CodeRemoteProtocol, nil},
		{"publish: answer not JSON", "publish", serve(201, nil, []byte(`created`)), CodeRemoteProtocol, nil},
		{"publish: 409", "publish", serve(409, nil, jsonErr("artifact 'echo@1.0.0' already exists")), CodeConflict, []string{"bump"}},
		{"publish: 422", "publish", serve(422, nil, jsonErr("reserved artifact version 'x' is not allowed")), CodeReserved, []string{"reserved artifact version 'x' is not allowed"}},
		{"publish: 400", "publish", serve(400, nil, jsonErr("invalid runtime")), CodeRemoteProtocol, []string{"invalid runtime"}},
		{"publish: 413", "publish", serve(413, nil, nil), CodeDeclaredSize, nil},
		{"publish: 502", "publish", serve(502, nil, nil), CodeRemoteDown, nil},
		{"publish: 401", "publish", serve(401, nil, jsonErr("unauthorized")), CodeRemoteAuth, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.handler)
			defer hs.Close()
			n := nexusAt(t, hs.URL, testPublishToken, hs.Client())
			var err error
			switch tt.op {
			case "fetch":
				var b *Blob
				if b, err = n.Fetch(context.Background(), ref); err == nil && (b.Platform != "" || b.SHA256 != sum) {
					t.Fatalf("fetched platform %q sha256 %s", b.Platform, b.SHA256)
				}
			case "list":
				_, err = n.List(context.Background())
			case "publish":
				_, err = n.Publish(context.Background(), data, "")
			}
			if tt.code == "" {
				must(t, err)
				return
			}
			e := assertCode(t, err, tt.code)
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the message does not say %q: %v", s, err)
				}
			}
			if strings.Contains(err.Error(), testPublishToken) || strings.Contains(err.Error(), "\x1b") {
				t.Errorf("the message shows the key or a control character: %q", err)
			}
			t.Log(e)
		})
	}
}

// TestNexusUnreachable: a registry that is not listening, or does not answer within the
// client's timeout, is E-REG-083 naming its address.
func TestNexusUnreachable(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	for _, tt := range []struct {
		name, base string
		client     *http.Client
	}{
		{"not listening", downURL, &http.Client{Timeout: RemoteTimeout}},
		{"no answer in time", hang.URL, &http.Client{Timeout: 200 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nexusAt(t, tt.base, "", tt.client).Fetch(context.Background(), Ref{Name: "echo", Version: "1.0.0"})
			e := assertCode(t, err, CodeRemoteDown)
			if !strings.Contains(e.Msg, tt.base) {
				t.Errorf("the message does not name the registry: %v", e)
			}
		})
	}
}

// TestNexusRedirectToPlainHTTP: the key does not follow a redirect off HTTPS to another
// host than loopback.
func TestNexusRedirectToPlainHTTP(t *testing.T) {
	var reached atomic.Bool
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Store(true)
		http.Redirect(w, r, "http://192.0.2.1/v1/artifacts", http.StatusFound)
	}))
	defer hs.Close()
	src := Source{Kind: KindNexus, Base: hs.URL, Spec: "nexus+" + hs.URL}
	n := NewNexus(src, OpenOptions{Auth: Auth{Token: testPublishToken}, Client: hs.Client()})
	_, err := n.List(context.Background())
	assertCode(t, err, CodeRemoteDown)
	if !reached.Load() || !strings.Contains(err.Error(), "plain HTTP") {
		t.Fatalf("redirect not refused as such: %v", err)
	}
}

// TestDecodeNexusListing reads valid listings and refuses broken ones naming the item
// and the field.
func TestDecodeNexusListing(t *testing.T) {
	item := func(extra string) string {
		return `[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool"` + extra + `}]`
	}
	for _, tt := range []struct {
		name, in string
		want     []Listing
		says     string // in the refusal; "" = accepted
	}{
		{name: "empty", in: `[]`, want: []Listing{}},
		{name: "full", in: `[{"name":"git-helper","version":"0.3.1","runtime":"native","artifact_runtime":"tool","platforms":[["linux","x86_64"],["darwin","aarch64"]],"description":"helps","tags":["git","vcs"],"extra":1}]`,
			want: []Listing{{Name: "git-helper", Version: "0.3.1", Implementation: "native", Role: "tool", Platforms: []string{"linux-x86_64", "darwin-aarch64"}, Description: "helps", Tags: []string{"git", "vcs"}}}},
		{name: "defaults", in: item(`,"description":null,"platforms":[],"tags":null`), want: []Listing{{Name: "a", Version: "1", Implementation: "wasm", Role: "tool"}}},
		{name: "hostile items left out", in: `[{"name":"../../etc","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"},` +
			`{"name":"a","version":"1.0.0/../../x","runtime":"wasm","artifact_runtime":"tool"},` +
			`{"name":"b","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool","platforms":[["linux\u001b[2J","x86_64"]]},` +
			`{"name":"Echo","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"},` +
			`{"name":"echo","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}]`,
			want: []Listing{{Name: "echo", Version: "1.0.0", Implementation: "wasm", Role: "tool"}}},
		{name: "not an array", in: `{}`, says: "not a JSON array"},
		{name: "null", in: `null`, says: "not a JSON array"},
		{name: "nothing", in: ``, says: "not a JSON array"},
		{name: "truncated", in: `[{"name":"a"`, says: "not valid JSON"},
		{name: "item not an object", in: `[1]`, says: "item 0 is not a JSON object"},
		{name: "item null", in: `[null]`, says: "item 0 is not a JSON object"},
		{name: "second item without name", in: `[` + item("")[1:len(item(""))-1] + `,{"version":"1","runtime":"wasm","artifact_runtime":"tool"}]`, says: `item 1: field "name" is missing`},
		{name: "version null", in: `[{"name":"a","version":null,"runtime":"wasm","artifact_runtime":"tool"}]`, says: `field "version" is missing`},
		{name: "runtime empty", in: `[{"name":"a","version":"1","runtime":"","artifact_runtime":"tool"}]`, says: `field "runtime" is empty`},
		{name: "no artifact_runtime", in: `[{"name":"a","version":"1","runtime":"wasm"}]`, says: `field "artifact_runtime" is missing`},
		{name: "name a number", in: `[{"name":1,"version":"1","runtime":"wasm","artifact_runtime":"tool"}]`, says: `field "name" is not a string`},
		{name: "platform a string", in: item(`,"platforms":["linux-x86_64"]`), says: `field "platforms"`},
		{name: "platform pair short", in: item(`,"platforms":[["linux"]]`), says: `field "platforms": entry 0`},
		{name: "platform pair empty arch", in: item(`,"platforms":[["linux",""]]`), says: `field "platforms": entry 0`},
		{name: "description a number", in: item(`,"description":3`), says: `field "description"`},
		{name: "tags a string", in: item(`,"tags":"x"`), says: `field "tags"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeNexusListing([]byte(tt.in))
			if tt.says != "" {
				e := assertCode(t, err, CodeRemoteProtocol)
				if !strings.Contains(e.Msg, tt.says) {
					t.Fatalf("refusal %v does not say %q", e, tt.says)
				}
				return
			}
			must(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
