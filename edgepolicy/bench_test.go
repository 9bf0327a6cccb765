package edgepolicy

import "testing"

func BenchmarkAllow(b *testing.B) {
	p := mustCompile(b, Config{Allow: typical})
	in := teamA()
	in.Principal = "team-b"
	in.Method = "GetTask"
	in.Claims = map[string]any{"roles": []any{"writer", "reader"}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := p.Allow(in); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkEgress(b *testing.B) {
	p := mustCompile(b, Config{Egress: `principal == "team-a" ? ["127.0.0.1:8081"] : []`})
	in := teamA()
	b.ReportAllocs()
	for b.Loop() {
		if rules, _, err := p.Egress(in); len(rules) != 1 || err != nil {
			b.Fatal(rules, err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	cfg := Config{Allow: typical, Egress: `principal == "team-a" ? ["127.0.0.1:8081"] : []`}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(cfg); err != nil {
			b.Fatal(err)
		}
	}
}
