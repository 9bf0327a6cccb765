package edgeauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// testCA is a CA that issues the server's and the clients' certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a leaf certificate; tmpl carries the names.
func (ca *testCA) issue(t *testing.T, serial int64, tmpl x509.Certificate, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// handshake runs a real TLS handshake over 127.0.0.1 and returns the server's view.
func handshake(t *testing.T, ca *testCA, auth tls.ClientAuthType, client *tls.Certificate) tls.ConnectionState {
	t.Helper()
	serverCert := ca.issue(t, 2, x509.Certificate{Subject: pkix.Name{CommonName: "gateway"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509.ExtKeyUsageServerAuth)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   auth,
		ClientCAs:    ca.pool,
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	type result struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		err = tc.HandshakeContext(t.Context())
		done <- result{cs: tc.ConnectionState(), err: err}
	}()

	cfg := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Reading makes a TLS 1.3 client wait for the server's verdict on its certificate.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	_, _ = conn.Read(one[:])
	conn.Close()

	r := <-done
	if r.err != nil {
		t.Fatalf("server handshake: %v", r.err)
	}
	return r.cs
}

func TestClientCert(t *testing.T) {
	ca := newCA(t, "Test Client CA")
	spiffe, _ := url.Parse("spiffe://example.test/agent/one")
	second, _ := url.Parse("https://example.test/two")
	full := ca.issue(t, 77, x509.Certificate{
		Subject:        pkix.Name{CommonName: "agent-one", Organization: []string{"Example"}},
		DNSNames:       []string{"agent-one.example.test", "alt.example.test"},
		URIs:           []*url.URL{spiffe, second},
		EmailAddresses: []string{"agent@example.test"},
	}, x509.ExtKeyUsageClientAuth)
	bare := ca.issue(t, 78, x509.Certificate{Subject: pkix.Name{Organization: []string{"Example"}}}, x509.ExtKeyUsageClientAuth)

	verified := handshake(t, ca, tls.RequireAndVerifyClientCert, &full)
	bareState := handshake(t, ca, tls.RequireAndVerifyClientCert, &bare)
	noCert := handshake(t, ca, tls.VerifyClientCertIfGiven, nil)
	unverified := handshake(t, ca, tls.RequireAnyClientCert, &full)
	if len(unverified.PeerCertificates) == 0 || len(unverified.VerifiedChains) != 0 {
		t.Fatal("RequireAnyClientCert should give peer certificates without verified chains")
	}

	tests := []struct {
		name      string
		cs        *tls.ConnectionState
		from      string
		principal string
		code      string
		msg       string
	}{
		{name: "default is cn", cs: &verified, from: "", principal: "agent-one"},
		{name: "cn", cs: &verified, from: "cn", principal: "agent-one"},
		{name: "uri", cs: &verified, from: "uri", principal: "spiffe://example.test/agent/one"},
		{name: "dns", cs: &verified, from: "dns", principal: "agent-one.example.test"},
		{name: "email", cs: &verified, from: "email", principal: "agent@example.test"},
		{name: "empty cn", cs: &bareState, from: "cn", code: CodeNoClientCert, msg: "empty Subject CommonName"},
		{name: "no uri", cs: &bareState, from: "uri", code: CodeNoClientCert, msg: "empty first URI SAN"},
		{name: "no dns", cs: &bareState, from: "dns", code: CodeNoClientCert, msg: "empty first DNS SAN"},
		{name: "no email", cs: &bareState, from: "email", code: CodeNoClientCert, msg: "empty first email SAN"},
		{name: "no certificate", cs: &noCert, code: CodeNoClientCert, msg: "no verified client certificate"},
		{name: "presented but not verified", cs: &unverified, code: CodeNoClientCert, msg: "no verified client certificate"},
		{name: "nil state", cs: nil, code: CodeNoClientCert},
		{name: "unknown field", cs: &verified, from: "subject", code: CodeConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ClientCert(tc.cs, tc.from)
			if tc.code != "" {
				if errs.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("err = %v, want %s mentioning %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Principal != tc.principal || id.Scheme != "mtls" {
				t.Fatalf("identity = %q/%q, want %q/mtls", id.Principal, id.Scheme, tc.principal)
			}
			c := id.Claims
			if c["subject"] != "CN=agent-one,O=Example" || c["issuer"] != "CN=Test Client CA" || c["serial"] != "77" {
				t.Fatalf("claims = %v", c)
			}
			if d := c["dns"].([]any); len(d) != 2 || d[1] != "alt.example.test" {
				t.Fatalf("dns = %v", c["dns"])
			}
			if u := c["uris"].([]any); len(u) != 2 || u[1] != "https://example.test/two" {
				t.Fatalf("uris = %v", c["uris"])
			}
			if e := c["emails"].([]any); len(e) != 1 || e[0] != "agent@example.test" {
				t.Fatalf("emails = %v", c["emails"])
			}
		})
	}
}
