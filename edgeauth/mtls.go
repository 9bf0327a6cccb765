package edgeauth

import (
	"crypto/tls"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
)

// certFields are the names ClientCert can take the principal from.
var certFields = map[string]string{
	"":      "Subject CommonName",
	"cn":    "Subject CommonName",
	"uri":   "first URI SAN",
	"dns":   "first DNS SAN",
	"email": "first email SAN",
}

// CheckCertField refuses a principal field ClientCert does not know, so a config
// error shows at load time rather than on the first connection.
func CheckCertField(from string) error {
	if _, ok := certFields[from]; !ok {
		return errs.New(CodeConfig, part, fmt.Sprintf("client certificate field %q is not known", clip(from)), `use "cn", "uri", "dns" or "email" (or leave it empty for cn)`)
	}
	return nil
}

// ClientCert returns the identity of an mTLS client whose certificate the TLS
// layer verified. Only cs.VerifiedChains counts: PeerCertificates alone may be an
// unverified certificate the client merely presented. The principal comes from the
// leaf's field named by from ("" or "cn", "uri", "dns", "email"); the claims are
// "subject", "issuer" and "serial" (strings) and "dns", "uris", "emails" ([]any of
// strings, like a JSON array decoded, so claim matchers treat both schemes alike).
func ClientCert(cs *tls.ConnectionState, from string) (Identity, error) {
	if err := CheckCertField(from); err != nil {
		return Identity{}, err
	}
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, errs.New(CodeNoClientCert, part, "the connection has no verified client certificate", "connect with a client certificate issued by a CA the gateway trusts for client authentication")
	}
	leaf := cs.VerifiedChains[0][0]

	dns := make([]any, 0, len(leaf.DNSNames))
	for _, n := range leaf.DNSNames {
		dns = append(dns, n)
	}
	uris := make([]any, 0, len(leaf.URIs))
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	emails := make([]any, 0, len(leaf.EmailAddresses))
	for _, e := range leaf.EmailAddresses {
		emails = append(emails, e)
	}

	var principal string
	switch from {
	case "", "cn":
		principal = leaf.Subject.CommonName
	case "uri":
		if len(uris) > 0 {
			principal = uris[0].(string)
		}
	case "dns":
		if len(dns) > 0 {
			principal = dns[0].(string)
		}
	case "email":
		if len(emails) > 0 {
			principal = emails[0].(string)
		}
	}
	if principal == "" {
		return Identity{}, errs.New(CodeNoClientCert, part, fmt.Sprintf("the client certificate %q has an empty %s, which names the caller", clip(leaf.Subject.String()), certFields[from]), "issue the client certificate with that name, or configure another certificate field")
	}
	return Identity{
		Principal: principal,
		Scheme:    "mtls",
		Claims: map[string]any{
			"subject": leaf.Subject.String(),
			"issuer":  leaf.Issuer.String(),
			"serial":  leaf.SerialNumber.String(),
			"dns":     dns,
			"uris":    uris,
			"emails":  emails,
		},
	}, nil
}
