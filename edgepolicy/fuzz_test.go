package edgepolicy

import (
	"errors"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// FuzzCompile checks that no expression text panics Compile, that a refusal is a
// well-formed errs.List, and that a compiled policy evaluates a fixed request without
// panicking and denies whenever evaluation fails.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		typical,
		`principal == "team-a" ? ["127.0.0.1:8081"] : []`,
		`has(claims.tenant) && claims.tenant.startsWith("a")`,
		`metadata.priority == "high"`,
		`claims.roles.exists(r, r == "reader")`,
		`[0,1,2].all(a, [0,1,2].all(b, a + b >= 0))`,
		`["https://" + claims.tenant + ".example.com"]`,
		`principal.split("-").size() > 1 && binding in ["grpc"]`,
		`principal == `,
		`"\xff"`,
		`claims.hosts`,
		`skill.matches("^sum.*$")`,
		`version == "1.0" || task_id != ""`,
	} {
		f.Add(s, "")
		f.Add("", s)
	}
	in := teamA()
	in.TaskID = "t-1"
	in.Claims["hosts"] = []any{"api.example.com", 3}
	in.Claims["nested"] = map[string]any{"k": []any{1.5, "x", true, nil}}
	f.Fuzz(func(t *testing.T, allow, egress string) {
		p, err := Compile(Config{Allow: allow, Egress: egress})
		if err != nil {
			if p != nil {
				t.Fatal("a policy returned with an error")
			}
			var list errs.List
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T is not a non-empty errs.List: %v", err, err)
			}
			for _, e := range list {
				if !strings.HasPrefix(e.Code, "E-POL-00") || e.Part != Part || e.Fix == "" {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		ok, err := p.Allow(in)
		if err != nil && (ok || errs.Code(err) != CodeEval) {
			t.Fatalf("Allow = %v, %v: an error must deny with %s", ok, err, CodeEval)
		}
		if allow == "" && (!ok || err != nil) {
			t.Fatalf("empty allow: Allow = %v, %v", ok, err)
		}
		rules, narrowed, err := p.Egress(in)
		if narrowed != (egress != "") {
			t.Fatalf("Egress narrowed = %v for egress %q", narrowed, egress)
		}
		if err != nil && (rules != nil || errs.Code(err) != CodeEval) {
			t.Fatalf("Egress = %v, %v: an error must give no rules and %s", rules, err, CodeEval)
		}
		if _, _, err := p.Egress(nil); err != nil && errs.Code(err) != CodeEval {
			t.Fatalf("Egress(nil) error %v lacks %s", err, CodeEval)
		}
	})
}
