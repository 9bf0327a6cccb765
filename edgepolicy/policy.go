package edgepolicy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// Config is a route's policy as the operator wrote it.
type Config struct {
	Allow  string // CEL, must be bool: true admits the request. Empty: everything allowed.
	Egress string // CEL, must be list(string): network.allow-style entries the caller's tasks are narrowed to. Empty: no narrowing.
}

// Policy is a compiled Config, safe for concurrent use.
type Policy struct {
	src    Config
	allow  cel.Program // nil: everything allowed
	egress cel.Program // nil: no narrowing
}

// Names of the two expressions, as errors name them.
const (
	exprAllow  = "allow"
	exprEgress = "egress"
)

// Limits that keep errors and evaluation bounded whatever the expression or the request.
const (
	maxIssues        = 5    // CEL errors reported per expression; the rest are counted
	maxEgressEntries = 1024 // entries an egress evaluation may yield
	maxMsg           = 200  // bytes of a runtime CEL message kept in an error
	interruptEvery   = 100  // comprehension iterations between interrupt checks
)

// variables are the declared names, in the order doc.go lists them.
var variables = []cel.EnvOption{
	cel.Variable("principal", cel.StringType),
	cel.Variable("authenticated", cel.BoolType),
	cel.Variable("scheme", cel.StringType),
	cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)),
	cel.Variable("method", cel.StringType),
	cel.Variable("binding", cel.StringType),
	cel.Variable("version", cel.StringType),
	cel.Variable("capsule", cel.StringType),
	cel.Variable("skill", cel.StringType),
	cel.Variable("metadata", cel.MapType(cel.StringType, cel.DynType)),
	cel.Variable("task_id", cel.StringType),
}

// variableNames is what an undeclared-reference error suggests instead.
const variableNames = "principal, authenticated, scheme, claims, method, binding, version, capsule, skill, metadata, task_id"

// env is built once: every policy shares the same declarations, and building an
// environment costs far more than compiling an expression in it.
var env = sync.OnceValues(func() (*cel.Env, error) {
	opts := append([]cel.EnvOption{}, variables...)
	opts = append(opts, ext.Strings())
	return cel.NewEnv(opts...)
})

// Compile type-checks both expressions of cfg and plans them for evaluation. Every
// problem found is reported, as an errs.List of CodeCompile, CodeType and CodeEgress
// errors, each naming the expression and the line:column in it.
func Compile(cfg Config) (*Policy, error) {
	e, err := env()
	if err != nil {
		return nil, errs.List{errs.Wrap(err, CodeCompile, Part, "the CEL environment could not be built", "report this as a bug")}
	}
	p := &Policy{src: cfg}
	var list errs.List
	var el errs.List
	p.allow, el = compileExpr(e, exprAllow, cfg.Allow)
	list = append(list, el...)
	p.egress, el = compileExpr(e, exprEgress, cfg.Egress)
	list = append(list, el...)
	if len(list) > 0 {
		return nil, list
	}
	return p, nil
}

// compileExpr compiles one expression; an empty src yields no program and no error.
func compileExpr(e *cel.Env, which, src string) (cel.Program, errs.List) {
	if src == "" {
		return nil, nil
	}
	if len(src) > MaxExprSize {
		return nil, errs.List{errs.New(CodeCompile, Part,
			fmt.Sprintf("%s: the expression is %d bytes, over the limit of %d", which, len(src), MaxExprSize),
			"shorten the expression; move long lists of names into claims the identity provider issues")}
	}
	checked, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, issueErrors(which, iss.Errors())
	}
	if list := checkType(which, checked); len(list) > 0 {
		return nil, list
	}
	if which == exprEgress {
		if list := checkConstEntries(checked); len(list) > 0 {
			return nil, list
		}
	}
	prg, err := e.Program(checked,
		cel.EvalOptions(cel.OptOptimize),
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		// Planning fails on what only the planner checks, such as a constant regular
		// expression that does not compile.
		return nil, errs.List{errs.New(CodeCompile, Part, fmt.Sprintf("%s: %s", which, err), "correct the expression")}
	}
	return prg, nil
}

// issueErrors turns CEL's parse and check errors into CodeCompile errors.
func issueErrors(which string, issues []*cel.Error) errs.List {
	var list errs.List
	for i, is := range issues {
		if i == maxIssues {
			list = append(list, errs.New(CodeCompile, Part,
				fmt.Sprintf("%s: %d more errors", which, len(issues)-maxIssues), "correct the errors above first"))
			break
		}
		fix := "correct the CEL syntax at that position"
		if strings.HasPrefix(is.Message, "undeclared reference") {
			fix = "use only the declared variables: " + variableNames
		} else if strings.HasPrefix(is.Message, "found no matching overload") {
			fix = "compare values of the same type; convert with string(), int() or dyn() where a claim's type is not known"
		}
		list = append(list, errs.New(CodeCompile, Part, fmt.Sprintf("%s%s: %s", which, where(is.Location), is.Message), fix))
	}
	return list
}

// where formats a CEL location as " line:column", both 1-based, or "" when unknown.
func where(l common.Location) string {
	if l == nil || l.Line() < 1 {
		return ""
	}
	return fmt.Sprintf(" %d:%d", l.Line(), l.Column()+1)
}

// at returns where the node id of a checked expression starts.
func at(a *cel.Ast, id int64) string {
	return where(a.NativeRep().SourceInfo().GetStartLocation(id))
}

// checkType refuses an allow that cannot be bool and an egress that cannot be a list of
// strings. dyn (a claim, say) passes: evaluation checks what it turns out to be.
func checkType(which string, a *cel.Ast) errs.List {
	t := a.OutputType()
	ok := t.Kind() == types.DynKind
	var want, fix string
	if which == exprAllow {
		ok = ok || t.Kind() == types.BoolKind
		want, fix = "bool", `write a condition, e.g. principal == "team-a"`
	} else {
		if t.Kind() == types.ListKind && len(t.Parameters()) == 1 {
			k := t.Parameters()[0].Kind()
			ok = ok || k == types.StringKind || k == types.DynKind
		}
		want, fix = "list(string)", `write a list of network.allow entries, e.g. ["api.example.com"], or a condition choosing one: principal == "team-a" ? ["api.example.com"] : []`
	}
	if ok {
		return nil
	}
	root := a.NativeRep().Expr().ID()
	return errs.List{errs.New(CodeType, Part,
		fmt.Sprintf("%s%s: the expression is %s, not %s", which, at(a, root), cel.FormatCELType(t), want), fix)}
}

// checkConstEntries refuses, at config load, the literal entries of an egress
// expression that netpolicy would refuse at every request: the elements of the list
// literals the expression can yield, through ?: and list +.
func checkConstEntries(a *cel.Ast) errs.List {
	var list errs.List
	resultLists(a.NativeRep().Expr(), func(entry ast.Expr) {
		if entry.Kind() != ast.LiteralKind {
			return // computed: checked at evaluation
		}
		v := entry.AsLiteral()
		s, ok := v.(types.String)
		if !ok {
			list = append(list, errs.New(CodeType, Part,
				fmt.Sprintf("%s%s: entry %v is %s, not a string", exprEgress, at(a, entry.ID()), v, v.Type().TypeName()),
				`write the entry as a string, e.g. "127.0.0.1:8081"`))
			return
		}
		if _, err := netpolicy.ParseRules([]string{string(s)}); err != nil {
			msg, fix, code := netpolicyProblem(err)
			list = append(list, errs.New(CodeEgress, Part,
				fmt.Sprintf("%s%s: %s (%s)", exprEgress, at(a, entry.ID()), msg, code), fix))
		}
	})
	return list
}

// resultLists calls f on each element of the list literals e can evaluate to.
func resultLists(e ast.Expr, f func(ast.Expr)) {
	switch e.Kind() {
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			branches(el, f)
		}
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch {
		case c.FunctionName() == operators.Conditional && len(args) == 3:
			resultLists(args[1], f)
			resultLists(args[2], f)
		case c.FunctionName() == operators.Add && len(args) == 2:
			resultLists(args[0], f)
			resultLists(args[1], f)
		}
	}
}

// branches calls f on each value e can take through ?:, or on e itself.
func branches(e ast.Expr, f func(ast.Expr)) {
	if e.Kind() == ast.CallKind {
		c := e.AsCall()
		if args := c.Args(); c.FunctionName() == operators.Conditional && len(args) == 3 {
			branches(args[1], f)
			branches(args[2], f)
			return
		}
	}
	f(e)
}

// netpolicyProblem returns the message, fix and code of netpolicy's first refusal.
func netpolicyProblem(err error) (msg, fix, code string) {
	var ne *errs.Error
	if errors.As(err, &ne) {
		return ne.Msg, ne.Fix, ne.Code
	}
	return err.Error(), "write a network.allow entry such as api.example.com or https://api.example.com", errs.Code(err)
}

// Allow reports whether the policy admits in. A nil Policy, or one without an allow
// expression, admits everything. An evaluation that fails, or yields anything but a
// bool, refuses: false and a CodeEval error.
func (p *Policy) Allow(in *Input) (bool, error) {
	if p == nil || p.allow == nil {
		return true, nil
	}
	out, _, err := p.allow.Eval(activate(in))
	if err != nil {
		return false, evalError(exprAllow, err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errs.New(CodeEval, Part,
			fmt.Sprintf("%s: the expression gave %s, not a bool", exprAllow, typeName(out)),
			"make every branch of the expression a condition; compare a claim to a value rather than using it directly")
	}
	return bool(b), nil
}

// Egress returns the rules in's tasks are narrowed to, and true; or nil and false when
// the policy has no egress expression, so nothing is narrowed. An empty list is rules
// that reach nothing. An evaluation that fails, a result that is not a list of
// strings, or an entry netpolicy refuses is a CodeEval error: the caller refuses the
// task rather than running it unnarrowed.
func (p *Policy) Egress(in *Input) (netpolicy.Rules, bool, error) {
	if p == nil || p.egress == nil {
		return nil, false, nil
	}
	out, _, err := p.egress.Eval(activate(in))
	if err != nil {
		return nil, true, evalError(exprEgress, err)
	}
	l, ok := out.(traits.Lister)
	if !ok {
		return nil, true, errs.New(CodeEval, Part,
			fmt.Sprintf("%s: the expression gave %s, not a list", exprEgress, typeName(out)),
			`make every branch of the expression a list of strings, e.g. ["api.example.com"]`)
	}
	n, _ := l.Size().(types.Int)
	if n > maxEgressEntries {
		return nil, true, errs.New(CodeEval, Part,
			fmt.Sprintf("%s: the expression gave %d entries, over the limit of %d", exprEgress, n, maxEgressEntries),
			"narrow to fewer hosts; use a wildcard such as *.example.com for many subdomains")
	}
	entries := make([]string, 0, int(n))
	for i, it := 0, l.Iterator(); it.HasNext() == types.True; i++ {
		v := it.Next()
		s, ok := v.(types.String)
		if !ok {
			return nil, true, errs.New(CodeEval, Part,
				fmt.Sprintf("%s: entry [%d] is %s, not a string", exprEgress, i, typeName(v)),
				"make every entry a string; convert a claim with string()")
		}
		entries = append(entries, string(s))
	}
	rules, err := netpolicy.ParseRules(entries)
	if err != nil {
		msg, fix, code := netpolicyProblem(err)
		idx := ""
		var ne *errs.Error
		if errors.As(err, &ne) {
			idx = " " + ne.Path
		}
		return nil, true, errs.New(CodeEval, Part,
			fmt.Sprintf("%s: entry%s: %s (%s)", exprEgress, idx, msg, code),
			"make the expression yield network.allow entries only: "+fix)
	}
	return rules, true, nil
}

// HasEgress reports whether the policy narrows egress at all.
func (p *Policy) HasEgress() bool { return p != nil && p.egress != nil }

// Source returns the Config the policy was compiled from.
func (p *Policy) Source() Config {
	if p == nil {
		return Config{}
	}
	return p.src
}

// evalError turns a failed evaluation into a CodeEval error, its CEL message clipped:
// the message can quote request data (a missing key), which the caller controls.
func evalError(which string, err error) *errs.Error {
	fix := "guard lookups that may miss with has(claims.x) or \"x\" in metadata, and convert values of unknown type; the request was refused"
	var ce interpreter.EvalCancelledError
	if errors.As(err, &ce) && ce.Cause == interpreter.CostLimitExceeded {
		fix = fmt.Sprintf("simplify the expression: evaluation stopped at the cost limit of %d; the request was refused", CostLimit)
	}
	return errs.New(CodeEval, Part, fmt.Sprintf("%s: %s", which, clip(err.Error(), maxMsg)), fix)
}

// typeName names the CEL type of v.
func typeName(v ref.Val) string {
	if v == nil {
		return "null"
	}
	if t := v.Type(); t != nil {
		return t.TypeName()
	}
	return fmt.Sprintf("%T", v)
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
