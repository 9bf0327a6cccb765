package edgepolicy

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// typical is the expression the benchmark and several tests evaluate.
const typical = `principal == "team-a" || (method in ["GetTask","ListTasks"] && "reader" in claims.roles)`

// teamA is an authenticated JWT caller sending a message.
func teamA() *Input {
	return &Input{
		Principal: "team-a", Authenticated: true, Scheme: "jwt",
		Claims: map[string]any{"roles": []any{"writer"}, "tenant": "acme", "level": int64(3)},
		Method: "SendMessage", Binding: "jsonrpc", Version: "1.0", Capsule: "summarizer",
		Skill: "summarize", Metadata: map[string]any{"priority": "high"},
	}
}

// with returns teamA changed by f.
func with(f func(*Input)) *Input {
	in := teamA()
	f(in)
	return in
}

func mustCompile(t testing.TB, cfg Config) *Policy {
	t.Helper()
	p, err := Compile(cfg)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", cfg, err)
	}
	return p
}

func TestAllow(t *testing.T) {
	reader := with(func(in *Input) {
		in.Principal = "team-b"
		in.Method = "GetTask"
		in.Claims = map[string]any{"roles": []any{"reader"}}
	})
	anon := &Input{Method: "GetExtendedAgentCard", Binding: "http+json", Version: "0.3", Capsule: "summarizer"}
	tests := []struct {
		name  string
		allow string
		in    *Input
		want  bool
	}{
		{"principal equal", `principal == "team-a"`, teamA(), true},
		{"principal differs", `principal == "team-b"`, teamA(), false},
		{"typical by principal", typical, teamA(), true},
		{"typical by role", typical, reader, true},
		{"typical role but writes", typical, with(func(in *Input) { in.Principal = "team-b"; in.Claims = reader.Claims }), false},
		{"typical role missing", typical, with(func(in *Input) { in.Principal = "team-b"; in.Method = "GetTask" }), false},
		{"claims list", `"writer" in claims.roles`, teamA(), true},
		{"claims has", `has(claims.tenant) && claims.tenant == "acme"`, teamA(), true},
		{"claims has not", `has(claims.tenant)`, with(func(in *Input) { in.Claims = nil }), false},
		{"claims int", `claims.level >= 2`, teamA(), true},
		{"claims index", `claims["tenant"] == "acme"`, teamA(), true},
		{"method list", `method in ["SendMessage", "SendStreamingMessage"]`, teamA(), true},
		{"method not in list", `method in ["GetTask", "ListTasks"]`, teamA(), false},
		{"skill", `skill == "summarize"`, teamA(), true},
		{"skill empty", `skill == ""`, with(func(in *Input) { in.Skill = "" }), true},
		{"metadata", `metadata.priority == "high"`, teamA(), true},
		{"metadata other", `metadata.priority == "high"`, with(func(in *Input) { in.Metadata = map[string]any{"priority": "low"} }), false},
		{"metadata guarded absent", `"priority" in metadata && metadata.priority == "high"`, with(func(in *Input) { in.Metadata = nil }), false},
		{"binding", `binding == "grpc" || version == "1.0"`, teamA(), true},
		{"binding and version", `binding == "http+json" && version == "0.3"`, teamA(), false},
		{"capsule", `capsule == "summarizer"`, teamA(), true},
		{"task id", `task_id == "" || task_id.startsWith("t-")`, with(func(in *Input) { in.TaskID = "t-1" }), true},
		{"scheme", `scheme in ["jwt", "mtls"]`, teamA(), true},
		{"anonymous refused", `authenticated`, anon, false},
		{"anonymous card", `authenticated || method == "GetExtendedAgentCard"`, anon, true},
		{"anonymous nil input", `!authenticated && principal == "" && size(claims) == 0`, nil, true},
		{"startsWith", `principal.startsWith("svc-")`, with(func(in *Input) { in.Principal = "svc-billing" }), true},
		{"startsWith no", `principal.startsWith("svc-")`, teamA(), false},
		{"ext strings", `principal.lowerAscii().split("-")[0] == "team"`, with(func(in *Input) { in.Principal = "TEAM-c" }), true},
		{"dyn claim bool", `claims.admin`, with(func(in *Input) { in.Claims = map[string]any{"admin": true} }), true},
		{"empty allows", ``, nil, true},
		{"macro", `claims.roles.exists(r, r.endsWith("er"))`, teamA(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Config{Allow: tt.allow})
			got, err := p.Allow(tt.in)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Allow(%q) = %v, want %v", tt.allow, got, tt.want)
			}
		})
	}
}

func TestNilPolicy(t *testing.T) {
	var p *Policy
	if ok, err := p.Allow(teamA()); !ok || err != nil {
		t.Fatalf("nil Allow = %v, %v; want true, nil", ok, err)
	}
	if r, ok, err := p.Egress(teamA()); r != nil || ok || err != nil {
		t.Fatalf("nil Egress = %v, %v, %v; want nil, false, nil", r, ok, err)
	}
	if p.HasEgress() || p.Source() != (Config{}) {
		t.Fatal("nil policy has egress or a source")
	}
	cfg := Config{Allow: `authenticated`, Egress: `[]`}
	q := mustCompile(t, cfg)
	if q.Source() != cfg || !q.HasEgress() {
		t.Fatalf("Source = %+v, HasEgress = %v", q.Source(), q.HasEgress())
	}
}

// singleErr returns the one *errs.Error of a Compile error, checking the list shape.
func singleErr(t *testing.T, err error) *errs.Error {
	t.Helper()
	var list errs.List
	if !errors.As(err, &list) {
		t.Fatalf("error %T %v is not an errs.List", err, err)
	}
	if len(list) != 1 {
		t.Fatalf("want one error, got %d:\n%v", len(list), err)
	}
	if list[0].Part != Part || list[0].Fix == "" {
		t.Fatalf("error lacks part or fix: %#v", list[0])
	}
	return list[0]
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		code string
		msg  string // the message starts with this
	}{
		{"syntax", Config{Allow: `principal == `}, CodeCompile, "allow 1:14: Syntax error: mismatched input '<EOF>'"},
		{"syntax second line", Config{Allow: "authenticated &&\n  principal ==== 'x'"}, CodeCompile, "allow 2:15: Syntax error:"},
		{"undeclared", Config{Allow: `principal == user`}, CodeCompile, "allow 1:14: undeclared reference to 'user'"},
		{"undeclared egress", Config{Egress: `[host]`}, CodeCompile, "egress 1:2: undeclared reference to 'host'"},
		{"no overload", Config{Allow: `principal > 3`}, CodeCompile, "allow 1:11: found no matching overload"},
		{"allow string", Config{Allow: `principal`}, CodeType, "allow 1:1: the expression is string, not bool"},
		{"allow list", Config{Allow: `["a"]`}, CodeType, "allow 1:1: the expression is list(string), not bool"},
		{"egress bool", Config{Egress: `authenticated`}, CodeType, "egress 1:1: the expression is bool, not list(string)"},
		{"egress string", Config{Egress: `"api.example.com"`}, CodeType, "egress 1:1: the expression is string, not list(string)"},
		{"egress list int", Config{Egress: `[443]`}, CodeType, "egress 1:1: the expression is list(int), not list(string)"},
		{"egress dyn list int", Config{Egress: `authenticated ? ["a.example.com"] : [claims.x, 8]`}, CodeType, "egress 1:48: entry 8 is int, not a string"},
		{"egress bad constant", Config{Egress: `principal == "team-a" ? ["ftp://files.example.com"] : []`}, CodeEgress, `egress 1:26: network rule "ftp://files.example.com": scheme "ftp" is not supported`},
		{"egress bad port", Config{Egress: `["127.0.0.1:99999"]`}, CodeEgress, `egress 1:2: network rule "127.0.0.1:99999": port`},
		{"egress too broad", Config{Egress: `["api.example.com"] + (authenticated ? ["*.com"] : [])`}, CodeEgress, `egress 1:41: network rule "*.com"`},
		{"egress nested conditional", Config{Egress: `[authenticated ? "a.example.com" : "http://x/path"]`}, CodeEgress, `egress 1:36: network rule "http://x/path": path`},
		{"allow too big", Config{Allow: `principal == "` + strings.Repeat("a", MaxExprSize) + `"`}, CodeCompile, "allow: the expression is 4111 bytes, over the limit of 4096"},
		{"egress too big", Config{Egress: strings.Repeat(" ", MaxExprSize+1)}, CodeCompile, "egress: the expression is 4097 bytes"},
		{"regex", Config{Allow: `principal.matches("(")`}, CodeCompile, "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.cfg)
			if err == nil {
				t.Fatalf("Compile(%+v) = %v, want %s", tt.cfg, p, tt.code)
			}
			if p != nil {
				t.Fatal("Compile returned a policy with an error")
			}
			e := singleErr(t, err)
			if e.Code != tt.code || !strings.HasPrefix(e.Msg, tt.msg) {
				t.Fatalf("got %s %q\nwant %s %q…", e.Code, e.Msg, tt.code, tt.msg)
			}
		})
	}
}

// TestCompileErrorText pins one whole error, as docs/errors.md quotes it.
func TestCompileErrorText(t *testing.T) {
	_, err := Compile(Config{Allow: `principal == user`})
	want := "policy: E-POL-001: allow 1:14: undeclared reference to 'user' (in container '') (fix: use only the declared variables: principal, authenticated, scheme, claims, method, binding, version, capsule, skill, metadata, task_id)"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestCompileReportsBoth(t *testing.T) {
	_, err := Compile(Config{Allow: `principal ==`, Egress: `["ftp://x.example.com", "https://ok.example.com", "a b"]`})
	if got, want := strings.Join(errs.Codes(err), " "), "E-POL-001 E-POL-004 E-POL-004"; got != want {
		t.Fatalf("codes = %s, want %s\n%v", got, want, err)
	}
}

func TestCompileManyIssues(t *testing.T) {
	_, err := Compile(Config{Allow: `a && b && c && d && e && f && g && h`})
	var list errs.List
	if !errors.As(err, &list) || len(list) != maxIssues+1 || !strings.Contains(list[maxIssues].Msg, "3 more errors") {
		t.Fatalf("want %d errors and a count, got:\n%v", maxIssues, err)
	}
}

func TestCompileAccepts(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Allow: `claims.admin`},              // dyn: checked at evaluation
		{Egress: `claims.hosts`},             // dyn
		{Egress: `[claims.host]`},            // list(dyn)
		{Egress: `[]`},                       // reach nothing
		{Egress: `["api.example.com"] + []`}, // list concatenation
		{Allow: `// who may call
principal == "team-a"`},
	} {
		if _, err := Compile(cfg); err != nil {
			t.Errorf("Compile(%+v): %v", cfg, err)
		}
	}
}

func TestAllowEvalErrors(t *testing.T) {
	tests := []struct {
		name  string
		allow string
		in    *Input
		msg   string
		fix   string
	}{
		{"missing key", `claims.tenant == "acme"`, with(func(in *Input) { in.Claims = nil }), "allow: no such key: tenant", "has("},
		{"missing metadata key", `metadata.priority == "high"`, with(func(in *Input) { in.Metadata = map[string]any{} }), "allow: no such key: priority", "has("},
		{"wrong type", `claims.tenant > 3`, teamA(), "allow: no such overload", "has("},
		{"not bool", `claims.tenant`, teamA(), "allow: the expression gave string, not a bool", "condition"},
		{"cost limit", `[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, [0,1,2,3,4,5,6,7,8,9].all(d, [0,1,2,3,4,5,6,7,8,9].all(e, a+b+c+d+e >= 0)))))`, teamA(), "allow: operation cancelled: actual cost limit exceeded", "cost limit of 100000"},
		{"cost limit strings", `[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, [0,1,2,3,4,5,6,7,8,9].all(d, (principal + principal + principal).contains("zzz") == false))))`, teamA(), "allow: operation cancelled: actual cost limit exceeded", "cost limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Config{Allow: tt.allow})
			start := time.Now()
			ok, err := p.Allow(tt.in)
			if ok {
				t.Fatal("Allow = true on an evaluation error; want deny")
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != CodeEval {
				t.Fatalf("error = %v, want %s", err, CodeEval)
			}
			if !strings.HasPrefix(e.Msg, tt.msg) || !strings.Contains(e.Fix, tt.fix) {
				t.Fatalf("got %q (fix %q), want %q… (fix …%q…)", e.Msg, e.Fix, tt.msg, tt.fix)
			}
			// Generous for -race; a runaway expression would take seconds.
			if d := time.Since(start); d > time.Second {
				t.Fatalf("evaluation took %v", d)
			}
		})
	}
}

func TestEvalMessageClipped(t *testing.T) {
	p := mustCompile(t, Config{Allow: `claims[metadata.k] == 1`})
	_, err := p.Allow(with(func(in *Input) { in.Metadata = map[string]any{"k": strings.Repeat("é", 1000)} }))
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Msg) > maxMsg+len("allow: ")+len("…") || !strings.HasSuffix(e.Msg, "…") {
		t.Fatalf("message not clipped: %d bytes: %v", len(e.Msg), err)
	}
}

func TestEgress(t *testing.T) {
	const byTeam = `principal == "team-a" ? ["127.0.0.1:8081"] : []`
	tests := []struct {
		name   string
		egress string
		in     *Input
		want   []string // rules as String() gives them
	}{
		{"team-a", byTeam, teamA(), []string{"127.0.0.1:8081"}},
		{"others reach nothing", byTeam, with(func(in *Input) { in.Principal = "team-b" }), []string{}},
		{"anonymous reaches nothing", byTeam, nil, []string{}},
		{"claims list", `claims.hosts`, with(func(in *Input) { in.Claims = map[string]any{"hosts": []any{"api.example.com", "*.example.org:443"}} }), []string{"api.example.com", "*.example.org:443"}},
		{"computed", `["https://" + claims.tenant + ".example.com"]`, teamA(), []string{"https://acme.example.com"}},
		{"concatenated", `["api.example.com"] + (metadata.priority == "high" ? ["http://127.0.0.1:8080"] : [])`, teamA(), []string{"api.example.com", "http://127.0.0.1:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Config{Egress: tt.egress})
			rules, ok, err := p.Egress(tt.in)
			if err != nil || !ok {
				t.Fatalf("Egress = %v, %v, %v", rules, ok, err)
			}
			if rules == nil {
				t.Fatal("rules are nil; an empty list must be rules that reach nothing")
			}
			got := make([]string, len(rules))
			for i, r := range rules {
				got[i] = r.String()
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("rules = %q, want %q", got, tt.want)
			}
		})
	}
	p := mustCompile(t, Config{Egress: byTeam})
	rules, _, _ := p.Egress(teamA())
	want, _ := netpolicy.ParseRules([]string{"127.0.0.1:8081"})
	if len(rules) != 1 || rules[0] != want[0] {
		t.Fatalf("rules = %+v, want %+v", rules, want)
	}
}

func TestEgressNone(t *testing.T) {
	p := mustCompile(t, Config{Allow: `true`})
	if r, ok, err := p.Egress(teamA()); r != nil || ok || err != nil {
		t.Fatalf("Egress = %v, %v, %v; want nil, false, nil", r, ok, err)
	}
	if p.HasEgress() {
		t.Fatal("HasEgress without an egress expression")
	}
}

func TestEgressEvalErrors(t *testing.T) {
	big := make([]any, maxEgressEntries+1)
	for i := range big {
		big[i] = "a.example.com"
	}
	tests := []struct {
		name   string
		egress string
		in     *Input
		msg    string
	}{
		{"computed entry bad", `["https://" + principal + ".example.com/path"]`, teamA(), `egress: entry [0]: network rule "https://team-a.example.com/path": path`},
		{"second entry bad", `["api.example.com", claims.tenant + ":0"]`, teamA(), `egress: entry [1]: network rule "acme:0": port`},
		{"claim not list", `claims.tenant`, teamA(), "egress: the expression gave string, not a list"},
		{"entry not string", `claims.hosts`, with(func(in *Input) { in.Claims = map[string]any{"hosts": []any{"a.example.com", 7}} }), "egress: entry [1] is int, not a string"},
		{"missing key", `[claims.host]`, teamA(), "egress: no such key: host"},
		{"too many", `claims.hosts`, with(func(in *Input) { in.Claims = map[string]any{"hosts": big} }), "egress: the expression gave 1025 entries"},
		{"cost", `[0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c, [0,1,2,3,4,5,6,7,8,9].map(d, [0,1,2,3,4,5,6,7,8,9].map(e, "x.example.com")))))[0][0][0][0]`, teamA(), "egress: operation cancelled: actual cost limit exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Config{Egress: tt.egress})
			rules, _, err := p.Egress(tt.in)
			if rules != nil {
				t.Fatalf("rules = %v on an error; want none", rules)
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != CodeEval {
				t.Fatalf("error = %v, want %s", err, CodeEval)
			}
			if !strings.HasPrefix(e.Msg, tt.msg) || e.Fix == "" {
				t.Fatalf("got %q (fix %q), want %q…", e.Msg, e.Fix, tt.msg)
			}
		})
	}
}

// TestConcurrent evaluates one policy from many goroutines, for the race detector.
func TestConcurrent(t *testing.T) {
	p := mustCompile(t, Config{Allow: typical, Egress: `principal == "team-a" ? ["127.0.0.1:8081"] : []`})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			in := teamA()
			if g%2 == 1 {
				in.Principal = "team-b"
			}
			for range 200 {
				ok, err := p.Allow(in)
				if err != nil || ok != (g%2 == 0) {
					t.Errorf("Allow = %v, %v", ok, err)
					return
				}
				rules, _, err := p.Egress(in)
				if err != nil || len(rules) != 1-g%2 {
					t.Errorf("Egress = %v, %v", rules, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
