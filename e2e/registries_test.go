package e2e

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/ocitest"
	"github.com/capsulegate/capsulegate/registry"
)

// regSite is a wordcount capsule staged from a remote registry by gateways that share
// nothing else: each has its own data folder, so its own artifact cache.
type regSite struct {
	dir, home string
	spec      string   // the registry, as --registry and the app's registry name it
	env       []string // the commands' and gateways' extra environment (credentials)
	appExtra  string   // more capsule app options (registry_auth)
	manifest  string
}

func newRegSite(t *testing.T, spec string, env []string, appExtra string) *regSite {
	t.Helper()
	s := &regSite{dir: t.TempDir(), spec: spec, env: env, appExtra: appExtra}
	s.home = filepath.Join(s.dir, "home")
	os.MkdirAll(s.home, 0o755)
	capDir := filepath.Join(s.dir, "capsule")
	copyDir(t, "../examples/capsules/wordcount", capDir)
	os.Remove(filepath.Join(capDir, "murmur.lock"))
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount-capsule"), 0o644)
	s.manifest = filepath.Join(capDir, "murmur.yaml")
	return s
}

// cli runs `caddy capsule args… --registry <spec>` with the site's environment.
func (s *regSite) cli(t *testing.T, args ...string) result {
	t.Helper()
	return capsuleEnv(t, s.home, s.env, append(args, "--registry", s.spec)...)
}

// publishWordcount packs the example wordcount tool and publishes it with the binary.
func (s *regSite) publishWordcount(t *testing.T) {
	t.Helper()
	tmp := t.TempDir()
	art := filepath.Join(tmp, "wordcount")
	copyDir(t, "../examples/artifacts/wordcount", art)
	os.WriteFile(filepath.Join(art, "wordcount.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount"), 0o644)
	zip := filepath.Join(tmp, "wordcount.mur.zip")
	if r := capsule(t, s.home, "pack", art, "--output", zip); r.code != 0 {
		t.Fatalf("pack: %s", r.stderr)
	}
	if r := s.cli(t, "publish", zip); r.code != 0 {
		t.Fatalf("publish: exit %d: %s", r.code, r.stderr)
	}
}

// installAndVerify pins the capsule's artifacts from the registry and checks them again;
// it returns the sha256 the lock pins for the wordcount tool.
func (s *regSite) installAndVerify(t *testing.T) string {
	t.Helper()
	for _, cmd := range []string{"install", "verify"} {
		if r := s.cli(t, cmd, s.manifest); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, r.code, r.stderr)
		}
	}
	lock, err := registry.ReadLock(registry.LockPath(s.manifest))
	if err != nil {
		t.Fatal(err)
	}
	e := lock.Entry("wordcount")
	if e == nil || e.SHA256.Any == "" {
		t.Fatalf("lock: %+v", lock)
	}
	return e.SHA256.Any
}

// gatewayCmd is a gateway named name serving the capsule at /agents/wordcount/ under
// handle_path, staging from the site's registry, with its own data folder.
func (s *regSite) gatewayCmd(t *testing.T, name string) (*gateway, *exec.Cmd) {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	g := &gateway{dir: filepath.Join(s.dir, name), home: s.home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	os.MkdirAll(g.dir, 0o755)
	g.caddyfile = filepath.Join(g.dir, "Caddyfile")
	cf := fmt.Sprintf(`{
	admin 127.0.0.1:%s
	default_bind 127.0.0.1
	capsule {
		registry %s
		%s
	}
}

http://127.0.0.1:%s {
	handle_path /agents/wordcount/* {
		capsule %s
	}
}
`, admin, s.spec, s.appExtra, port, s.manifest)
	os.WriteFile(g.caddyfile, []byte(cf), 0o644)
	cmd := exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	cmd.Dir = g.dir
	cmd.Env = append([]string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH"),
		"XDG_DATA_HOME=" + filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.dir, "config")}, s.env...)
	return g, cmd
}

// start runs gateway name and returns it once it serves.
func (s *regSite) start(t *testing.T, name string) *gateway {
	t.Helper()
	g, cmd := s.gatewayCmd(t, name)
	g.cmd = cmd
	waitServing(t, cmd, g.logs)
	return g
}

// refused runs gateway name, which must refuse its config and exit; it returns its output.
func (s *regSite) refused(t *testing.T, name string) string {
	t.Helper()
	g, cmd := s.gatewayCmd(t, name)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("gateway %s exited 0:\n%s", name, out.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("gateway %s did not refuse its config within 3 minutes:\n%s", name, out.String())
	}
	if strings.Contains(out.String(), "serving initial configuration") {
		t.Fatalf("gateway %s served:\n%s", g.dir, out.String())
	}
	return out.String()
}

// stop interrupts a gateway and waits for it to end.
func stopGateway(g *gateway) {
	g.cmd.Process.Signal(os.Interrupt)
	g.cmd.Wait()
}

// countWords sends one task to the gateway's wordcount capsule and checks its answer.
func countWords(t *testing.T, g *gateway) {
	t.Helper()
	tk := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("one two three four")}))
	if tk.Status.State != "completed" || !strings.Contains(tk.text(), "4 words") {
		t.Fatalf("%s: task %+v", g.base, tk)
	}
}

// cacheFiles lists the artifact cache entries of gateway g's data folder.
func cacheFiles(g *gateway) []string {
	ents, _ := os.ReadDir(filepath.Join(g.dir, "data", "caddy", "capsule", "cache", "artifacts", "sha256"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestRegistryOCI: publish, install, verify and stage from a real OCI registry; three
// gateways stage the same capsule from it; a blob altered in the registry's storage is
// refused by each of three gateways before anything is compiled, naming the artifact and
// both digests; with the registry stopped, a gateway restarts and stages from its cache,
// and one without a cache is told the registry is down.
func TestRegistryOCI(t *testing.T) {
	// Parallel: it waits on its own servers and processes more than it computes, and
	// the package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	reg := ocitest.Start(t)
	s := newRegSite(t, reg.URL(), nil, "")
	s.publishWordcount(t)
	pinned := s.installAndVerify(t)
	if r := s.cli(t, "search", "words"); r.code != 0 || !strings.Contains(r.stdout, "wordcount") || !strings.Contains(r.stdout, "1.1.0") {
		t.Fatalf("search: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}

	var gws []*gateway
	for _, name := range []string{"gw-1", "gw-2", "gw-3"} {
		gws = append(gws, s.start(t, name))
	}
	for _, g := range gws {
		countWords(t, g)
		if got := cacheFiles(g); len(got) != 1 || got[0] != pinned {
			t.Fatalf("%s cache: %v, want the pinned %s", g.dir, got, pinned)
		}
		// The staged capsule's artifact is held against eviction while it is served.
		pins, _ := os.ReadFile(filepath.Join(g.dir, "data", "caddy", "capsule", "cache", "artifacts", "pins", strconv.Itoa(g.cmd.Process.Pid)))
		if !strings.Contains(string(pins), pinned) {
			t.Fatalf("%s holds %q in its cache, want %s", g.dir, pins, pinned)
		}
	}
	for _, g := range gws {
		stopGateway(g)
	}

	// Alter the layer's bytes where the registry keeps them; its manifest still states
	// the pinned digest.
	blob := filepath.Join(reg.Storage, "docker", "registry", "v2", "blobs", "sha256", pinned[:2], pinned, "data")
	good, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(blob, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	badSum := fmt.Sprintf("%x", sha256.Sum256(bad))
	for _, name := range []string{"fresh-1", "fresh-2", "fresh-3"} {
		out := s.refused(t, name)
		for _, want := range []string{"wordcount@1.1.0", pinned, badSum} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s: the refusal does not name %s:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "capsule staged") {
			t.Fatalf("%s staged:\n%s", name, out)
		}
	}
	if err := os.WriteFile(blob, good, 0o644); err != nil {
		t.Fatal(err)
	}

	// The registry down: gw-1 restarts from its cache; a gateway with none cannot stage.
	reg.Stop()
	g := s.start(t, "gw-1")
	countWords(t, g)
	out := s.refused(t, "fresh-4")
	if !strings.Contains(out, registry.CodeRemoteDown) {
		t.Fatalf("a gateway with no cache and the registry down:\n%s", out)
	}
}

// startRegistryCaddy runs a second Caddy serving a registry folder with the
// capsule_registry handler under handle_path /nexus/*, and returns its Nexus base URL.
func startRegistryCaddy(t *testing.T, root string) string {
	t.Helper()
	port := freePort(t)
	serveSites(t, fmt.Sprintf(`http://127.0.0.1:%s {
	handle_path /nexus/* {
		capsule_registry %s {
			publish_token {env.PUBLISH_TOKEN}
			read_token {env.READ_TOKEN}
		}
	}
}
`, port, root), "PUBLISH_TOKEN="+publishToken, "READ_TOKEN="+readToken)
	return "http://127.0.0.1:" + port + "/nexus"
}

const (
	publishToken = "publish-token-0123456789"
	readToken    = "read-token-0123456789abc"
)

// tree lists every file under root with its size, to show that nothing was added.
func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, _ := d.Info()
		lines = append(lines, fmt.Sprintf("%s %v %d", strings.TrimPrefix(p, root), d.IsDir(), info.Size()))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestRegistryNexus: the same round trip through Murmur's Nexus protocol against the
// capsule_registry handler in a second Caddy process; hostile and unauthorized uploads
// are refused and leave nothing behind; a Nexus server stating a wrong x-murmur-sha256
// is refused.
func TestRegistryNexus(t *testing.T) {
	// Parallel: it waits on its own servers and processes more than it computes, and
	// the package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	root := filepath.Join(t.TempDir(), "registry")
	base := startRegistryCaddy(t, root)
	spec := "nexus+" + base
	publisher := newRegSite(t, spec, []string{"NEXUS_API_KEY=" + publishToken}, "")
	publisher.publishWordcount(t)
	if r := publisher.cli(t, "publish", filepath.Join(t.TempDir(), "none.mur.zip")); r.code == 0 {
		t.Fatal("publishing a missing file succeeded")
	}

	// Readers hold the read token only; the gateways take it from registry_auth.
	s := newRegSite(t, spec, []string{"NEXUS_API_KEY=" + readToken, "NEXUS_READ=" + readToken}, "registry_auth {\n\t\t\ttoken {env.NEXUS_READ}\n\t\t}")
	pinned := s.installAndVerify(t)
	if r := s.cli(t, "search", "count"); r.code != 0 || !strings.Contains(r.stdout, "wordcount") {
		t.Fatalf("search: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	g := s.start(t, "gw-1")
	countWords(t, g)
	if got := cacheFiles(g); len(got) != 1 || got[0] != pinned {
		t.Fatalf("cache: %v, want %s", got, pinned)
	}

	// Hostile uploads, straight to the handler as any client could send them.
	before := tree(t, root)
	for _, up := range []struct {
		name, token, query string
		body               []byte
		status             int
	}{
		{"a .. entry", publishToken, "name=evil&version=1.0.0&runtime=wasm", zipOf(t, zipEntry{name: "murmur.yaml", data: []byte("name: evil\nversion: 1.0.0\n")}, zipEntry{name: "../evil.wasm", data: []byte("\x00asm\x01\x00\x00\x00")}), http.StatusBadRequest},
		{"a zip bomb", publishToken, "name=bomb&version=1.0.0&runtime=wasm", zipBomb(t), http.StatusBadRequest},
		{"the read token", readToken, "name=wordcount&version=9.0.0&runtime=wasm", zipOf(t, zipEntry{name: "murmur.yaml", data: []byte("name: wordcount\nversion: 9.0.0\n")}, zipEntry{name: "wordcount.wasm", data: []byte("\x00asm\x01\x00\x00\x00")}), http.StatusUnauthorized},
		{"a wrong token", "not-the-token-at-all-000", "name=wordcount&version=9.0.0&runtime=wasm", []byte("zip"), http.StatusUnauthorized},
		{"no token", "", "name=wordcount&version=9.0.0&runtime=wasm", []byte("zip"), http.StatusUnauthorized},
		{"a duplicate", publishToken, "name=wordcount&version=1.1.0&runtime=wasm", nil, http.StatusConflict},
	} {
		body := up.body
		if body == nil {
			body = fetchArchive(t, base, "wordcount", "1.1.0")
		}
		req, _ := http.NewRequest("POST", base+"/v1/artifacts?"+up.query, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		if up.token != "" {
			req.Header.Set("Authorization", "Bearer "+up.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != up.status {
			t.Errorf("%s: status %d, want %d: %s", up.name, resp.StatusCode, up.status, msg)
		}
		if after := tree(t, root); after != before {
			t.Errorf("%s left files behind:\n%s\nwas:\n%s", up.name, after, before)
		}
	}

	// A Nexus server whose header misstates the bytes' sha256.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := fetchArchive(t, base, "wordcount", "1.1.0")
		w.Header().Set("x-murmur-sha256", strings.Repeat("ab", 32))
		w.Write(data)
	}))
	defer liar.Close()
	u, _ := url.Parse(liar.URL)
	// Its own home, so its own (empty) artifact cache: the bytes must come from the liar.
	l := &regSite{dir: s.dir, home: t.TempDir(), spec: "nexus+http://" + u.Host, manifest: s.manifest}
	r := l.cli(t, "verify", s.manifest)
	if r.code == 0 || !strings.Contains(r.stderr, registry.CodeHashMismatch) || !strings.Contains(r.stderr, pinned) || !strings.Contains(r.stderr, strings.Repeat("ab", 32)) {
		t.Fatalf("a wrong x-murmur-sha256: exit %d: %s", r.code, r.stderr)
	}
}

// fetchArchive downloads name@version from the handler with the read token.
func fetchArchive(t *testing.T, base, name, version string) []byte {
	req, _ := http.NewRequestWithContext(context.Background(), "GET", base+"/v1/artifacts/"+name+"/"+version, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("GET %s@%s: %d %s", name, version, resp.StatusCode, data)
	}
	return data
}

type zipEntry struct {
	name string
	data []byte
}

// zipOf writes entries as they are named, unchecked: a hostile archive.
func zipOf(t *testing.T, ents ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.data)
	}
	zw.Close()
	return buf.Bytes()
}

// zipBomb is an archive whose one entry declares 1 KiB and inflates to 64 MiB.
func zipBomb(t *testing.T) []byte {
	t.Helper()
	var packed bytes.Buffer
	fw, _ := flate.NewWriter(&packed, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		fw.Write(zeros)
	}
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "murmur.yaml", Method: zip.Deflate})
	w.Write([]byte("name: bomb\nversion: 1.0.0\n"))
	raw, err := zw.CreateRaw(&zip.FileHeader{Name: "bomb.wasm", Method: zip.Deflate, CompressedSize64: uint64(packed.Len()), UncompressedSize64: 1024})
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(packed.Bytes())
	zw.Close()
	return buf.Bytes()
}
