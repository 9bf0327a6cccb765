package pgstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
)

// testCA makes a certificate authority and a certificate it signs for 127.0.0.1,
// returning the CA's and the server's PEM and the server's key.
func testCA(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capsulegate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestTLS: the URL's sslmode decides TLS. verify-full against the server's CA connects;
// against another CA it is refused (E-STORE-015, naming the host) rather than connected
// unchecked; a server without TLS refuses sslmode=require.
func TestTLS(t *testing.T) {
	pgtest.Need(t)
	caPEM, certPEM, keyPEM := testCA(t)
	otherCA, _, _ := testCA(t)
	c, err := pgtest.Start(pgtest.Options{TLSCert: certPEM, TLSKey: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dsn, err := c.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ours, theirs := write("ca.pem", caPEM), write("other.pem", otherCA)
	with := func(dsn string, q map[string]string) string {
		u, _ := url.Parse(dsn)
		v := u.Query()
		for k, x := range q {
			v.Set(k, x)
		}
		u.RawQuery = v.Encode()
		return u.String()
	}
	plain := pgtest.NewDatabase(t) // the shared cluster has no TLS
	for _, tt := range []struct {
		name string
		dsn  string
		code string // "" = opens
	}{
		{"verify-full, the server's CA", with(dsn, map[string]string{"sslmode": "verify-full", "sslrootcert": ours}), ""},
		{"verify-full, another CA", with(dsn, map[string]string{"sslmode": "verify-full", "sslrootcert": theirs}), pgstore.CodeUnreachable},
		{"require, a server without TLS", with(plain, map[string]string{"sslmode": "require"}), pgstore.CodeUnreachable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := pgstore.Open(context.Background(), tt.dsn, pgstore.Options{Timeout: 5 * time.Second})
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				if err := <-s.PutTask(task("over-tls")); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			wantCode(t, "Open", err, tt.code)
			if !strings.Contains(err.Error(), "127.0.0.1:") {
				t.Errorf("the refusal does not name the host: %v", err)
			}
		})
	}
}
