package e2e

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/jwttest"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// issuer is a JWT issuer on loopback: its JWKS endpoint serves the current key set,
// which the test rotates.
type issuer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	keys  jose.JSONWebKeySet
	hits  atomic.Int64
	url   string
	a, b  *ecdsa.PrivateKey
	rsaPK *rsa.PrivateKey
}

func startIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	var err error
	if is.a, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if is.b, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if is.rsaPK, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(is.keys)
	}))
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL
	is.serve(jose.JSONWebKey{Key: &is.a.PublicKey, KeyID: "key-a", Algorithm: "ES256", Use: "sig"},
		jose.JSONWebKey{Key: &is.rsaPK.PublicKey, KeyID: "key-rsa", Algorithm: "RS256", Use: "sig"})
	return is
}

// serve makes keys the JWKS from now on: a rotation.
func (is *issuer) serve(keys ...jose.JSONWebKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = jose.JSONWebKeySet{Keys: keys}
}

// token signs claims (iss, aud, exp filled unless given) with key under kid.
func (is *issuer) token(t *testing.T, key crypto.Signer, alg jose.SignatureAlgorithm, kid string, claims map[string]any) string {
	t.Helper()
	full := jwttest.Override(map[string]any{"iss": is.url, "aud": "capsulegate", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}, claims)
	return jwttest.Sign(t, key, alg, kid, full, map[jose.HeaderKey]any{"typ": "JWT"})
}

// forged builds a compact JWS by hand: alg none (no signature), or HS256 keyed with
// secret (the algorithm-confusion attack: the issuer's public key as the HMAC secret).
func forged(alg string, secret []byte, claims map[string]any) string {
	if alg == "none" {
		secret = nil
	}
	return jwttest.Handmade(map[string]any{"alg": alg, "typ": "JWT", "kid": "key-rsa"}, claims, secret)
}

// pki is a CA, a server certificate for 127.0.0.1 and a client certificate, on disk.
type pki struct {
	dir                    string
	caPEM, certPEM, keyPEM string
	client                 tls.Certificate
	pool                   *x509.CertPool
	clientOther            tls.Certificate // from a CA the gateway does not trust
	clientCNName           string
}

func newPKI(t *testing.T, clientCN string) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), clientCNName: clientCN}
	ca, caKey := selfCA(t, "capsulegate test CA")
	serverKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	server := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	serverDER, err := x509.CreateCertificate(rand.Reader, server, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.client = leaf(t, ca, caKey, clientCN)
	other, otherKey := selfCA(t, "another CA")
	p.clientOther = leaf(t, other, otherKey, "mallory")
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(p.dir, name)
		os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
		return path
	}
	p.caPEM = write("ca.pem", "CERTIFICATE", ca.Raw)
	p.certPEM = write("server.pem", "CERTIFICATE", serverDER)
	keyDER, _ := x509.MarshalECPrivateKey(serverKey)
	p.keyPEM = write("server-key.pem", "EC PRIVATE KEY", keyDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p
}

func selfCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestEdgeSecurity: the built gateway authenticates by JWT (a test issuer on loopback
// whose key rotates mid-test) and by client certificate; a JWT's principal owns its
// tasks as a bearer principal does; each bad token is refused 401 with its code in
// WWW-Authenticate; a principal over its rate is refused while another is not, counted
// from zero; the access log names principal and task; a denial writes a decision line;
// a policy that does not compile refuses the config at its position.
func TestEdgeSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	is := startIssuer(t)
	certs := newPKI(t, "carol")
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	reg := filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	gt := filepath.Join(dir, "gatetool")
	os.MkdirAll(gt, 0o755)
	os.WriteFile(filepath.Join(gt, "murmur.yaml"), []byte("name: gatetool\nversion: 1.0.0\nruntime: tool\ndescription: echoes\n"), 0o644)
	publish(t, home, reg, gt, "gatetool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))
	capDir := filepath.Join(dir, "edge")
	gateCapsule(t, capDir, "gate-edge", "1.0.0", gateLimits)
	manifest := filepath.Join(capDir, "murmur.yaml")
	// A capsule granted one loopback host, whose route's policy narrows team-b's tasks
	// to nothing of it.
	var targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		targetHits.Add(1)
		fmt.Fprint(w, "reached")
	}))
	t.Cleanup(target.Close)
	narrowDir := filepath.Join(dir, "narrow")
	gateCapsule(t, narrowDir, "gate-narrow", "1.0.0", fmt.Sprintf("capabilities:\n  network: {allow: [\"%s\"]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 300}\n", target.URL))
	httpPort, tlsPort := freePort(t), freePort(t)
	accessLog := filepath.Join(dir, "access.log")
	jwtBlock := fmt.Sprintf(`auth jwt {
				issuer %s
				audience capsulegate
				jwks_url %s/jwks.json
				min_refresh 1s
			}`, is.url, is.url)
	sites := fmt.Sprintf(`http://127.0.0.1:%[1]s {
	log {
		output file %[3]s
		format json
	}
	handle_path /agents/edge/* {
		capsule %[4]s {
			%[5]s
			limits {
				rate 0.001/s
				burst 4
			}
		}
	}
	handle /metrics {
		metrics
	}
	handle_path /agents/narrow/* {
		capsule %[9]s {
			auth bearer {
				team-a TEAM_A_TOKEN
				team-b TEAM_B_TOKEN
			}
			policy {
				egress `+"`"+`principal == "team-a" ? ["%[10]s"] : []`+"`"+`
			}
		}
	}
}

https://127.0.0.1:%[2]s {
	tls %[6]s %[7]s {
		client_auth {
			mode require_and_verify
			trust_pool file %[8]s
		}
	}
	handle_path /agents/edge/* {
		capsule %[4]s {
			auth mtls cn
		}
	}
}
`, httpPort, tlsPort, accessLog, manifest, jwtBlock, certs.certPEM, certs.keyPEM, certs.caPEM, filepath.Join(narrowDir, "murmur.yaml"), target.URL)
	logs := serveGlobalLogs(t, "", "registry "+reg+"\n\t\tcache_dir "+gatewayCache()+"\n\t\tstate_dir "+filepath.Join(dir, "state"), sites, "HOME="+home, "TEAM_A_TOKEN=team-a-token", "TEAM_B_TOKEN=team-b-token")
	base := "http://127.0.0.1:" + httpPort + "/agents/edge/"
	c := &http.Client{Timeout: time.Minute}
	call := func(token, method string, params any) rpcReply {
		t.Helper()
		var h []string
		if token != "" {
			h = []string{"Authorization", "Bearer " + token}
		}
		r, err := rpc(c, base, "1.0", method, params, h...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	send := map[string]any{"message": msg10("hi")}

	alice := is.token(t, is.a, jose.ES256, "key-a", map[string]any{"sub": "alice"})
	bob := is.token(t, is.a, jose.ES256, "key-a", map[string]any{"sub": "bob"})
	// A JWT's principal owns its task: bob does not see alice's.
	r := call(alice, "SendMessage", send)
	if r.status != http.StatusOK || r.Error != nil {
		t.Fatalf("alice's message: HTTP %d %s", r.status, r.body)
	}
	var sent struct {
		Task struct{ ID string } `json:"task"`
	}
	json.Unmarshal(r.Result, &sent)
	if r := call(alice, "GetTask", map[string]any{"id": sent.Task.ID}); r.Error != nil {
		t.Errorf("alice reads her task: %s", r.body)
	}
	if r := call(bob, "GetTask", map[string]any{"id": sent.Task.ID}); r.Error == nil || r.Error.Code != -32001 {
		t.Errorf("bob reads alice's task: %s, want task not found", r.body)
	}

	// Each bad token: 401, RFC 6750's invalid_token, its code.
	pubDER, _ := x509.MarshalPKIXPublicKey(&is.rsaPK.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := map[string]any{"iss": is.url, "aud": "capsulegate", "sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()}
	for _, tc := range []struct{ name, token, code string }{
		{"expired", is.token(t, is.a, jose.ES256, "key-a", map[string]any{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()}), "E-AUTH-006"},
		{"wrong audience", is.token(t, is.a, jose.ES256, "key-a", map[string]any{"sub": "alice", "aud": "someone-else"}), "E-AUTH-009"},
		{"wrong issuer", is.token(t, is.a, jose.ES256, "key-a", map[string]any{"sub": "alice", "iss": "https://evil.example"}), "E-AUTH-008"},
		{"unknown kid after refresh", is.token(t, is.a, jose.ES256, "key-nope", map[string]any{"sub": "alice"}), "E-AUTH-004"},
		{"alg none", forged("none", nil, valid), "E-AUTH-003"},
		{"HS256 keyed with the public key (PEM)", forged("HS256", pubPEM, valid), "E-AUTH-003"},
		{"HS256 keyed with the public key (DER)", forged("HS256", pubDER, valid), "E-AUTH-003"},
		{"tampered payload", tamper(alice), "E-AUTH-005"},
	} {
		resp := post(t, c, base, tc.token)
		challenge := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) || !strings.Contains(challenge, tc.code) {
			t.Errorf("%s: HTTP %d, WWW-Authenticate %q; want 401 with invalid_token and %s", tc.name, resp.StatusCode, challenge, tc.code)
		}
	}
	// Over HTTP+JSON: the same refusal in that binding's shape.
	req, _ := http.NewRequest(http.MethodGet, base+"tasks/"+sent.Task.ID, nil)
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+forged("none", nil, valid))
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var b struct {
			Error struct{ Status string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || b.Error.Status != "UNAUTHENTICATED" || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "E-AUTH-003") {
			t.Errorf("alg none over HTTP+JSON: HTTP %d %+v %q", resp.StatusCode, b, resp.Header.Get("WWW-Authenticate"))
		}
	}

	// Rate: alice's bucket of 4 is spent (send, get, list above + this); bob's is not.
	over := 0
	for range 3 {
		if r := call(alice, "ListTasks", map[string]any{}); r.Error != nil && r.Error.Code == -32033 {
			over++
		}
	}
	if over == 0 {
		t.Error("alice was never refused for her rate")
	}
	if r := call(bob, "ListTasks", map[string]any{}); r.Error != nil {
		t.Errorf("bob while alice is over her rate: %s", r.body)
	}
	metrics := get(t, c, "http://127.0.0.1:"+httpPort+"/metrics")
	if !strings.Contains(metrics, `capsule_limit_refusals_total{capsule="gate-edge",limit="rate"} `+fmt.Sprint(over)) {
		t.Errorf("capsule_limit_refusals_total does not count %d rate refusals:\n%s", over, grepLines(metrics, "capsule_limit_refusals_total"))
	}
	if !strings.Contains(metrics, `capsule_auth_refusals_total{capsule="gate-edge",code="E-AUTH-003"} 4`) {
		t.Errorf("capsule_auth_refusals_total: %s", grepLines(metrics, "capsule_auth_refusals_total"))
	}

	// The issuer rotates to key B: its tokens are taken once the gateway refetches (at
	// most once per min_refresh), and key A's no longer are.
	is.serve(jose.JSONWebKey{Key: &is.b.PublicKey, KeyID: "key-b", Algorithm: "ES256", Use: "sig"})
	dave := is.token(t, is.b, jose.ES256, "key-b", map[string]any{"sub": "dave"})
	eventually(t, 30*time.Second, "a token of the rotated key is taken", func() bool {
		return call(dave, "ListTasks", map[string]any{}).status == http.StatusOK
	})
	if resp := post(t, c, base, bob); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "E-AUTH-004") {
		t.Errorf("a token of the key rotated out: HTTP %d %q, want 401 with E-AUTH-004", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	// mTLS: the verified certificate names the principal, and its task is its own.
	tc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.pool, Certificates: []tls.Certificate{certs.client}}}}
	mtlsBase := "https://127.0.0.1:" + tlsPort + "/agents/edge/"
	r, err := rpc(tc, mtlsBase, "1.0", "SendMessage", send)
	if err != nil || r.Error != nil {
		t.Fatalf("carol's message over mTLS: %v %s", err, r.body)
	}
	var carols struct {
		Task struct{ ID string } `json:"task"`
	}
	json.Unmarshal(r.Result, &carols)
	if r, _ := rpc(tc, mtlsBase, "1.0", "ListTasks", map[string]any{}); !strings.Contains(string(r.body), carols.Task.ID) || strings.Contains(string(r.body), sent.Task.ID) {
		t.Errorf("carol's list: %s; want her task and not alice's", r.body)
	}
	untrusted := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.pool, Certificates: []tls.Certificate{certs.clientOther}}}}
	// Refused in the handshake, or, where Caddy's fallback policy completed it, with
	// 421 for a site whose policy asks for a verified certificate: never served.
	if r, err := rpc(untrusted, mtlsBase, "1.0", "ListTasks", map[string]any{}); err == nil && r.status == http.StatusOK {
		t.Errorf("a certificate of an untrusted CA was served: HTTP %d %s", r.status, r.body)
	}

	// The access log names principal and task; each refusal wrote a decision line.
	var found bool
	f, err := os.Open(accessLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			UserID    string `json:"user_id"`
			Principal string `json:"capsule_principal"`
			Task      string `json:"capsule_task"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Principal == "alice" && line.Task == sent.Task.ID && line.UserID == "alice" {
			found = true
		}
	}
	if !found {
		data, _ := os.ReadFile(accessLog)
		t.Errorf("no access log line names alice and her task %s:\n%s", sent.Task.ID, data)
	}
	for _, want := range []string{`"kind":"auth"`, `"code":"E-AUTH-006"`, `"kind":"rate"`, `"principal":"alice"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no decision log line holds %s", want)
		}
	}

	// Egress narrowed by the caller: the same capsule reaches the host for team-a, and
	// for team-b the policy dialer refuses it (E-NET-027) before any byte is sent.
	for _, tc := range []struct {
		token string
		reach bool
	}{{"team-a-token", true}, {"team-b-token", false}} {
		before := targetHits.Load()
		r, err := rpc(c, "http://127.0.0.1:"+httpPort+"/agents/narrow/", "", "message/send", map[string]any{"message": msg03("barrier " + target.URL + "/x")},
			"Authorization", "Bearer "+tc.token)
		if err != nil {
			t.Fatal(err)
		}
		got := targetHits.Load() - before
		if tc.reach && (got != 1 || !strings.Contains(string(r.body), "reached")) {
			t.Errorf("%s: the host saw %d requests; answer %s", tc.token, got, r.body)
		}
		if !tc.reach && (got != 0 || !strings.Contains(string(r.body), "E-NET-027")) {
			t.Errorf("%s: the host saw %d requests; answer %s; want none and E-NET-027", tc.token, got, r.body)
		}
	}

	// A policy that does not compile refuses the config, at its position.
	bad := filepath.Join(dir, "Caddyfile.bad")
	os.WriteFile(bad, []byte(fmt.Sprintf("{\n\tadmin off\n}\nhttp://127.0.0.1:%s {\n\tcapsule %s {\n\t\tpolicy {\n\t\t\tallow `principal == `\n\t\t}\n\t}\n}\n", freePort(t), manifest)), 0o644)
	out, err := exec.Command(caddyBin, "adapt", "--config", bad, "--adapter", "caddyfile").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "E-POL-001") || !strings.Contains(string(out), "allow 1:") || !strings.Contains(string(out), "Caddyfile.bad:7") {
		t.Errorf("a broken policy: %v\n%s", err, out)
	} else {
		t.Logf("a broken policy is refused: %s", out)
	}
}

// post sends a ListTasks as the holder of token and returns the response.
func post(t *testing.T, c *http.Client, u, token string) *http.Response {
	t.Helper()
	resp, err := c.Do(rpcRequest(u, "1.0", []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`), "Authorization", "Bearer "+token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// tamper changes one claim of a signed token, keeping its signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	p = []byte(strings.Replace(string(p), `"alice"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTokenBudget: the hello capsule behind a route with a token budget per principal.
// The cassette's two turns report 473 and 549 tokens: team-a's first task (1 022) runs
// whole; its second starts under the budget of 1 400, reaches 1 495 with its first turn
// and ends failed with the budget's message instead of calling the model again; its third
// is refused before it starts; team-b's own budget lets its task run.
func TestTokenBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	g := launchGatewayWith(t, caddyBin, "", gatewayExtra{routes: `	handle_path /budget/* {
		capsule examples/capsules/hello/murmur.yaml {
			auth bearer {
				team-a TEAM_A_TOKEN
				team-b TEAM_B_TOKEN
			}
			limits {
				tokens 1400
				window 24h
			}
		}
	}`})
	if v, ok := scrape(t, g)[`capsule_limit_refusals_total{capsule="hello",limit="tokens"}`]; !ok || v != 0 {
		t.Errorf("the tokens limit's series before any refusal: %v (present %v), want 0 from the start", v, ok)
	}
	teamA := []string{"Authorization", "Bearer team-a-token"}
	teamB := []string{"Authorization", "Bearer team-b-token"}
	send := func(who []string) rpcReply {
		return g.call(t, "/budget/", "", "message/send", map[string]any{"message": msg03("count the words: one two three")}, who...)
	}
	if tk := decodeTask(t, send(teamA)); tk.Status.State != "completed" {
		t.Fatalf("team-a's first task: %s", tk)
	}
	if tk := decodeTask(t, send(teamA)); tk.Status.State != "failed" || !strings.Contains(string(tk.Status.Message), "E-RUN-022") ||
		!strings.Contains(string(tk.Status.Message), "1495 of 1400") {
		t.Errorf("team-a's second task: %s %s; want failed with E-RUN-022 and 1495 of 1400", tk.Status.State, tk.Status.Message)
	}
	resp := g.post(t, "/budget/", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m-3","parts":[{"kind":"text","text":"count the words: one"}]}}}`), teamA...)
	var r rpcReply
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if r.Error == nil || r.Error.Code != -32034 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("team-a's third task: %+v, Retry-After %q; want -32034 with Retry-After", r.Error, resp.Header.Get("Retry-After"))
	}
	if tk := decodeTask(t, send(teamB)); tk.Status.State != "completed" {
		t.Errorf("team-b's task while team-a's budget is spent: %s", tk)
	}
	if got := scrape(t, g)[`capsule_limit_refusals_total{capsule="hello",limit="tokens"}`]; got != 1 {
		t.Errorf("capsule_limit_refusals_total{limit=tokens} = %v, want 1", got)
	}
}

// TestExplain: `caddy capsule explain --json` for every example capsule. Each host its
// network rules allow is reachable through the policy dialer built from what it lists,
// and a host it does not list is refused; the paths it lists are the ones a run's guest
// gets; the capsule with a sandboxed harness names this host's tier.
func TestExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	tmp := t.TempDir()
	home, reg := filepath.Join(tmp, "home"), filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	publish(t, home, reg, "../examples/artifacts/greeting", "greeting", nil)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	publish(t, home, reg, "../examples/artifacts/conformance-io", "conformance-io", guestbuild.Wasm(t, "../examples/guests/conformance-io"))
	publish(t, home, reg, "../examples/drivers/codex/artifact", "codex", guestbuild.Wasm(t, "../examples/drivers/codex"))
	type grants struct {
		Network    []string
		Filesystem []struct{ Path string }
		Artifacts  []struct{ Name, Runs string }
		Shell      *struct{ Tier string }
	}
	explain := func(name string) grants {
		t.Helper()
		dir := filepath.Join(tmp, "capsules", name)
		copyDir(t, "../examples/capsules/"+name, dir)
		os.Remove(filepath.Join(dir, "murmur.lock"))
		switch name {
		case "wordcount", "conformance":
			os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/"+name+"-capsule"), 0o644)
		}
		m := filepath.Join(dir, "murmur.yaml")
		if r := capsule(t, home, "install", m, "--registry", reg); r.code != 0 {
			t.Fatalf("install %s: exit %d: %s", name, r.code, r.stderr)
		}
		r := capsule(t, home, "explain", m, "--registry", reg, "--json")
		if r.code != 0 {
			t.Fatalf("explain %s: exit %d: %s", name, r.code, r.stderr)
		}
		var out struct {
			OK     bool
			Grants grants
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !out.OK {
			t.Fatalf("explain %s --json: %v: %s", name, err, r.stdout)
		}
		if name == "codex" {
			// The text form once, for the capsule with the most to say.
			if h := capsule(t, home, "explain", m, "--registry", reg); h.code != 0 || !strings.Contains(h.stdout, "effective grants on this host") ||
				!strings.Contains(h.stdout, "this host gives tier") {
				t.Errorf("explain %s: exit %d: %s", name, h.code, h.stdout)
			}
		}
		return out.Grants
	}
	listener := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(listener.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(listener.URL, "http://"))
	for _, name := range []string{"hello", "wordcount", "conformance", "codex"} {
		t.Run(name, func(t *testing.T) {
			g := explain(name)
			rules, err := netpolicy.ParseRules(g.Network)
			if err != nil {
				t.Fatalf("the listed rules %v: %v", g.Network, err)
			}
			d := &netpolicy.Dialer{Rules: rules}
			// The loopback listener is reachable exactly when a listed rule allows it.
			_, allowed := rules.Check("http", "127.0.0.1", mustAtoi(t, port), nil)
			c, err := d.DialContext(t.Context(), "tcp", "127.0.0.1:"+port)
			if c != nil {
				c.Close()
			}
			if name == "conformance" && allowed != nil {
				t.Errorf("the conformance capsule (network.allow: 127.0.0.1) lists %v, which does not reach loopback", g.Network)
			}
			if (err == nil) != (allowed == nil) {
				t.Errorf("%s lists %v; the loopback listener: dial error %v, rules say %v", name, g.Network, err, allowed)
			}
			// A host no rule lists is refused before any address is looked up.
			if _, err := d.DialContext(t.Context(), "tcp", "unlisted.example:443"); err == nil {
				t.Errorf("%s: a host it does not list was dialed", name)
			}
			paths := map[string]bool{}
			for _, p := range g.Filesystem {
				paths[p.Path] = true
			}
			for _, want := range []string{"/", "/task.md", "/in/", "/out/", "/MURMUR.md"} {
				if !paths[want] {
					t.Errorf("%s: explain lists no %s: %v", name, want, g.Filesystem)
				}
			}
			if name == "codex" && (g.Shell == nil || g.Shell.Tier == "") {
				t.Errorf("the codex capsule's harness sandbox: %+v, want this host's tier", g.Shell)
			}
		})
	}
	// The paths a guest gets: a run of the wordcount script capsule leaves its task, its
	// notes and its output where explain says, in the workdir that is its "/".
	workRoot := filepath.Join(tmp, "work")
	r := capsule(t, home, "run", filepath.Join(tmp, "capsules", "wordcount", "murmur.yaml"), "--registry", reg, "--work-root", workRoot, "--task", "one two", "--json")
	var out struct{ Status, Workdir string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != "completed" {
		t.Fatalf("run: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{"task.md", "out", "MURMUR.md"} {
		if _, err := os.Stat(filepath.Join(out.Workdir, p)); err != nil {
			t.Errorf("the guest's /%s (explain lists it) is not in the run's workdir: %v", p, err)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
