package netpolicy

import (
	"fmt"
	"testing"
)

// benchEntries is a realistic allow list of 50 rules.
var benchEntries = func() []string {
	var out []string
	for i := range 20 {
		out = append(out, fmt.Sprintf("https://api%d.example.com", i))
	}
	for i := range 10 {
		out = append(out, fmt.Sprintf("*.svc%d.example.net", i))
	}
	for i := range 10 {
		out = append(out, fmt.Sprintf("host%d.example.org:8443", i))
	}
	for i := range 5 {
		out = append(out, fmt.Sprintf("http://192.0.2.%d:8080", i+1))
	}
	return append(out, "localhost:3000", "[2001:db8::1]", "pypi.org", "files.pythonhosted.org", "registry.npmjs.org")
}()

var benchHosts = []string{
	"api7.example.com",        // exact, early
	"registry.npmjs.org",      // exact, last
	"a.b.svc9.example.net",    // wildcard
	"192.0.2.5",               // IP
	"0xc0000205",              // IP in hex
	"unknown.example.com",     // miss
	"BÜCHER.example",          // IDNA, miss
	"FILES.PythonHosted.org.", // case and root dot
}

func BenchmarkMatch(b *testing.B) {
	rs := mustRules(b, benchEntries...)
	if len(rs) != 50 {
		b.Fatalf("%d rules, want 50", len(rs))
	}
	b.Run("mixed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rs.match("https", benchHosts[i%len(benchHosts)], 443)
		}
	})
	for _, host := range benchHosts {
		b.Run(host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rs.match("https", host, 443)
			}
		})
	}
}

func BenchmarkParseRules(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRules(benchEntries); err != nil {
			b.Fatal(err)
		}
	}
}
