package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// The Grafana dashboard and the Prometheus alerting rules of deploy/ (docs/operators.md
// "Dashboard and rules files"): the rules file is the one docs/operators.md shows and
// promtool accepts it; every query of the dashboard names only metrics
// docs/reference/metrics.md documents, and answers with at least one series from a real
// Prometheus scraping a gateway that ran a few tasks.

const (
	rulesFile     = "../deploy/prometheus/capsulegate-rules.yml"
	dashboardFile = "../deploy/grafana/capsulegate-dashboard.json"
)

// TestRulesFile checks deploy/prometheus/capsulegate-rules.yml: docs/operators.md shows
// it as it is (the one fenced YAML block holding a groups: line, its indentation
// aside), and promtool check rules accepts it.
func TestRulesFile(t *testing.T) {
	file, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("docs/operators.md shows it", func(t *testing.T) {
		doc, err := os.ReadFile("../docs/operators.md")
		if err != nil {
			t.Fatal(err)
		}
		var blocks [][]string
		for _, b := range fencedBlocks(string(doc), "yaml") {
			if slices.Contains(b, "groups:") {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) != 1 {
			t.Fatalf("docs/operators.md has %d fenced yaml blocks with a groups: line, want the rules file's alone", len(blocks))
		}
		want := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
		for i := range max(len(want), len(blocks[0])) {
			var w, g string
			if i < len(want) {
				w = want[i]
			}
			if i < len(blocks[0]) {
				g = blocks[0][i]
			}
			if w != g {
				t.Fatalf("docs/operators.md's rules differ from %s at line %d of the file:\nfile: %q\ndoc:  %q\nedit the file and copy it into the doc", rulesFile, i+1, w, g)
			}
		}
	})
	t.Run("promtool check rules", func(t *testing.T) {
		cmd := exec.Command(needTool(t, "promtool"), "check", "rules", rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
		}
	})
}

// fencedBlocks returns the lines of md's fenced code blocks of language lang, each less
// the indentation of its opening fence (a block in a list item is indented).
func fencedBlocks(md, lang string) [][]string {
	var blocks [][]string
	var cur []string
	indent, in := "", false
	for line := range strings.Lines(md) {
		line = strings.TrimSuffix(line, "\n")
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case !in && trimmed == "```"+lang:
			in, indent, cur = true, line[:len(line)-len(trimmed)], []string{}
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	SchemaVersion int    `json:"schemaVersion"`
	UID           string `json:"uid"`
	Title         string `json:"title"`
	Templating    struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashVariable struct {
	Name, Type string
	Query      any    `json:"query"` // a string, or the query editor's object
	AllValue   string `json:"allValue"`
	Datasource *struct{ Type, UID string }
}

// query is the variable's query text.
func (v dashVariable) query() string {
	if m, ok := v.Query.(map[string]any); ok {
		q, _ := m["query"].(string)
		return q
	}
	q, _ := v.Query.(string)
	return q
}

var labelValuesRE = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

type dashPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a collapsed row's
}

// dashQuery is one PromQL query of the dashboard: a panel target's, or the capsule
// variable's (label_values(m, capsule) asked as count by (capsule) (m)).
type dashQuery struct {
	where, expr string
}

// readDashboard decodes the dashboard and returns it with its queries, the variables
// substituted as Grafana would with the capsule variable at All: $capsule (or ${capsule})
// is .* (the queries match it with =~), $__rate_interval and $__interval 1m.
func readDashboard(t *testing.T) (dashboard, []dashQuery) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := strings.NewReplacer("${capsule}", ".*", "$capsule", ".*", "${__rate_interval}", "1m", "$__rate_interval", "1m",
		"${__interval}", "1m", "$__interval", "1m")
	var queries []dashQuery
	for _, v := range d.Templating.List {
		q := v.query()
		if lv := labelValuesRE.FindStringSubmatch(q); lv != nil {
			queries = append(queries, dashQuery{"variable " + v.Name + ": " + q, fmt.Sprintf("count by (%s) (%s)", lv[2], lv[1])})
		}
	}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				queries = append(queries, dashQuery{fmt.Sprintf("panel %d %q, target %s", p.ID, p.Title, tg.RefID), vars.Replace(tg.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, queries
}

// documentedMetrics returns the metrics of docs/reference/metrics.md's tables with their
// types (counter, gauge, histogram).
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(capsule_\\w+)` \\| (\\w+) \\|").FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 20 {
		t.Fatalf("docs/reference/metrics.md: %d metrics found in its tables: has their layout changed?", len(out))
	}
	return out
}

// undocumented returns the metric names expr uses that docs/reference/metrics.md does
// not document (a histogram's _bucket, _sum and _count series are its own).
func undocumented(expr string, documented map[string]string) []string {
	var out []string
	for _, name := range regexp.MustCompile(`\bcapsule_\w+`).FindAllString(expr, -1) {
		if documented[name] != "" {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if base == name || documented[base] != "histogram" {
			out = append(out, name)
		}
	}
	return out
}

// TestDashboard checks deploy/grafana/capsulegate-dashboard.json: its shape (a
// Prometheus datasource variable every panel uses, a capsule variable), that its queries
// name documented metrics only, and — against a real Prometheus scraping the example
// gateway and a gateway on a PostgreSQL task store after a few tasks — that every query
// answers with at least one series.
func TestDashboard(t *testing.T) {
	// Parallel: it mostly waits on Prometheus's scrapes, and the package's wall time is
	// near its bound (docs/benchmarks.md, the test suite's time). Parallel tests start
	// after the serial ones, TestPostgresOutage among them: the shared cluster is up.
	t.Parallel()
	d, queries := readDashboard(t)
	t.Run("shape", func(t *testing.T) {
		if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
			t.Errorf("schemaVersion %d, uid %q, title %q", d.SchemaVersion, d.UID, d.Title)
		}
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type + " " + v.query()
			if v.Name == "capsule" && (v.AllValue != ".*" || v.Datasource == nil || v.Datasource.UID != "${datasource}") {
				t.Errorf("the capsule variable: allValue %q (want .*, the panels match it with =~), datasource %+v", v.AllValue, v.Datasource)
			}
		}
		if vars["datasource"] != "datasource prometheus" || !strings.HasPrefix(vars["capsule"], "query label_values(") {
			t.Errorf("variables %q: want datasource (a Prometheus datasource) and capsule (label_values of a capsule series)", vars)
		}
		ids := map[int]string{}
		var walk func([]dashPanel)
		walk = func(ps []dashPanel) {
			for _, p := range ps {
				if prev, ok := ids[p.ID]; ok {
					t.Errorf("panels %q and %q share the id %d", prev, p.Title, p.ID)
				}
				ids[p.ID] = p.Title
				if p.Type != "row" && len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				for _, tg := range p.Targets {
					ds := tg.Datasource
					if ds == nil {
						ds = p.Datasource
					}
					if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
						t.Errorf("panel %q, target %s: datasource %+v, want the datasource variable", p.Title, tg.RefID, ds)
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
	})
	t.Run("documented metrics only", func(t *testing.T) {
		documented := documentedMetrics(t)
		for _, q := range queries {
			if bad := undocumented(q.expr, documented); len(bad) > 0 {
				t.Errorf("%s: %v not in docs/reference/metrics.md\n%s", q.where, bad, q.expr)
			}
			if strings.Contains(q.expr, "$") {
				t.Errorf("%s: a variable the test does not know (it knows $capsule, $__rate_interval, $__interval)\n%s", q.where, q.expr)
			}
		}
	})
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	t.Run("every query answers", func(t *testing.T) { dashboardAnswers(t, queries) })
}

// dashboardAnswers starts the example gateway (startGateway) and, with PostgreSQL, a
// gateway on a PostgreSQL task store (storeGateway), a Prometheus scraping both every
// second, runs a few tasks and waits (at most a minute) until every query answers with a
// series. Without PostgreSQL (outside CI, where it is required) the queries of the store
// and fleet series, which only a gateway with a store exports, are left out.
func dashboardAnswers(t *testing.T, queries []dashQuery) {
	needTool(t, "prometheus") // skip before starting anything
	_, pgErr := pgtest.Binaries()
	if pgErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(pgErr) // .ci/run installs PostgreSQL
		}
		var kept []dashQuery
		for _, q := range queries {
			if strings.Contains(q.expr, "capsule_store_") || strings.Contains(q.expr, "capsule_fleet_") {
				t.Logf("no PostgreSQL (%v): not asked: %s", pgErr, q.where)
				continue
			}
			kept = append(kept, q)
		}
		queries = kept
	}
	start := time.Now()
	g := startGateway(t)
	targets := []string{strings.TrimPrefix(g.base, "http://")}
	var sg *gateway
	if pgErr == nil {
		sg = storeGateway(t)
		targets = append(targets, strings.TrimPrefix(sg.base, "http://"))
	}
	query := startPrometheus(t, targets...)
	t.Logf("gateways and Prometheus started in %s", time.Since(start).Round(time.Millisecond))
	dashboardLoad(t, g, sg)

	// Prometheus scrapes on its own clock, and a rate needs two samples of a series.
	loaded := time.Now()
	pending := queries
	for deadline := time.Now().Add(time.Minute); len(pending) > 0 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var still []dashQuery
		for _, q := range pending {
			series, err := promQuery(query, q.expr)
			if errors.Is(err, errPromQuery) {
				t.Fatalf("%s: %v", q.where, err)
			}
			if len(series) == 0 {
				still = append(still, q)
			}
		}
		pending = still
	}
	for _, q := range pending {
		t.Errorf("%s: no series within a minute of the load\n%s", q.where, q.expr)
	}
	t.Logf("%d queries answered %s after the load", len(queries)-len(pending), time.Since(loaded).Round(time.Millisecond))
}

// dashboardLoad runs the tasks that make the dashboard's series exist: on the example
// gateway an agent task (driver turns, their stop reasons), an input-required one, one
// failed on a deadline trap, one queued behind a running task of its context and both
// canceled, one rejected under single; on the store gateway (when there is one) a script
// capsule calling the artifact manager, a pull refused.
func dashboardLoad(t *testing.T, g, sg *gateway) {
	t.Helper()
	send := func(g *gateway, path string, msg map[string]any, blocking bool) task03 {
		t.Helper()
		return decodeTask(t, g.call(t, path, "", "message/send", map[string]any{"message": msg, "configuration": map[string]any{"blocking": blocking}}))
	}
	expect := func(tk task03, state string) {
		t.Helper()
		if tk.Status.State != state {
			t.Fatalf("want %s: %v", state, tk)
		}
	}
	expect(send(g, "/agents/hello/", msg03("Say hello, then count the words in: the quick brown fox"), true), "completed")
	asked := send(g, "/agents/wordcount/", msg03(""), true)
	expect(asked, "input-required")
	expect(send(g, "/agents/wordcount/", msg03("a b c", asked.ID, asked.ContextID), true), "completed")
	expect(send(g, "/agents/gate-deadline/", msg03("spin"), true), "failed")

	running := startSpinning(t, g, "/agents/gate-queue/", "ctx_dashboard")
	queued := send(g, "/agents/gate-queue/", msg03("spin", "", "ctx_dashboard"), false)
	expect(queued, "submitted")
	for _, id := range []string{running, queued.ID} {
		expect(decodeTask(t, g.call(t, "/agents/gate-queue/", "", "tasks/cancel", map[string]any{"id": id})), "canceled")
	}
	busy := startSpinning(t, g, "/agents/gate-single/", "ctx_dashboard")
	expect(send(g, "/agents/gate-single/", msg03("hi", "", "ctx_dashboard"), true), "rejected")
	expect(decodeTask(t, g.call(t, "/agents/gate-single/", "", "tasks/cancel", map[string]any{"id": busy})), "canceled")

	if sg != nil {
		tk := send(sg, "/agents/puller/", msg03("list\npull echo 1.0.0"), true)
		expect(tk, "completed")
		if got := tk.text(); !strings.HasPrefix(got, "ok: ") || !strings.Contains(got, "error: not-granted") {
			t.Fatalf("the puller answered %q, want the list and the pull refused", got)
		}
	}
}

// storeGateway runs a gateway on a PostgreSQL task store (a database of its own on the
// shared cluster), one replica of a fleet, serving the puller script capsule (granted
// capabilities.install, with no runtime_pulls: its pulls are refused) at /agents/puller/.
func storeGateway(t *testing.T) *gateway {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	capDir := filepath.Join(dir, "puller")
	os.MkdirAll(capDir, 0o755)
	manifest := filepath.Join(capDir, "murmur.yaml")
	os.WriteFile(manifest, []byte("name: puller\nversion: 1.0.0\ncapabilities:\n  install: {tool: [\"echo*\"]}\n"+
		"  limits: {memory_bytes: 134217728, deadline_seconds: 120}\n"), 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/puller"), 0o644)

	port, admin := freePort(t), freePort(t)
	g := &gateway{dir: filepath.Join(dir, "gw"), home: home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	os.MkdirAll(g.dir, 0o755)
	g.caddyfile = filepath.Join(g.dir, "Caddyfile")
	os.WriteFile(g.caddyfile, []byte(fmt.Sprintf(`{
	admin %s
	default_bind 127.0.0.1
	capsule {
		store {env.CAPSULE_STORE}
		instance dashboard-1
	}
}

http://127.0.0.1:%s {
	handle_path /agents/puller/* {
		capsule %s
	}
	handle /metrics {
		metrics
	}
}
`, g.admin, port, manifest)), 0o644)
	g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir = g.dir
	g.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CAPSULE_STORE=" + dsn,
		"XDG_DATA_HOME=" + filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.dir, "config")}
	waitServing(t, g.cmd, g.logs)
	return g
}

// needTool returns the path of the Prometheus tool name (prometheus, promtool). Without
// it the test skips, except in CI (or with CAPSULEGATE_REQUIRE_PROMETHEUS set), where
// .ci/run installs Debian's prometheus package and the test fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CAPSULEGATE_REQUIRE_PROMETHEUS") != "" || os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; .ci/run installs the Debian package prometheus", name)
		}
		t.Skipf("%s is not installed (apt-get install prometheus); .ci/run installs it and requires this test", name)
	}
	return bin
}

// promSeries is one series of an instant query's answer.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// errPromQuery marks a query Prometheus refused (bad_data: a PromQL error), as opposed
// to a server not answering yet.
var errPromQuery = errors.New("prometheus refused the query")

// promQuery runs expr through the instant query API at queryURL (startPrometheus) and
// returns its series (a scalar or string answer is none). It fails no test, so it may
// be polled.
func promQuery(queryURL, expr string) ([]promSeries, error) {
	resp, err := http.Get(queryURL + "?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, ErrorType, Error string
		Data                     struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %v", expr, resp.StatusCode, err)
	}
	if r.Status != "success" {
		if r.ErrorType == "bad_data" {
			return nil, fmt.Errorf("%w %s: %s", errPromQuery, expr, r.Error)
		}
		return nil, fmt.Errorf("%s: %s: %s", expr, r.ErrorType, r.Error)
	}
	var series []promSeries
	if r.Data.ResultType == "vector" || r.Data.ResultType == "matrix" {
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			return nil, fmt.Errorf("%s: %v", expr, err)
		}
	}
	return series, nil
}
