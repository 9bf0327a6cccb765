package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// The task store on PostgreSQL through the real gateway: the durable scenario of
// TestGateway's kill -9 case, the database going away under load and coming back, and
// config reloads under load. Each test has a database of its own on the cluster the test
// binary shares (pgtest.Shared); none runs in parallel, as TestPostgresOutage and
// TestPostgresStoreSwitchOnReload stop that cluster for a while.

// pgStoreKey is the store_key the gateways seal push configs with (at least 32 bytes).
const pgStoreKey = "e2e-store-key-0123456789abcdef-0123456789"

// pgSite is what the gateways of a PostgreSQL test serve: a registry and three capsules
// laid out once — wordcount; gate-slot, the gateway test guest queueing behind a route of
// one slot; gate-deadline, the same guest with a deadline of pgDeadline seconds — and a
// webhook receiver push configs may name. Every gateway a test starts on them gets the
// database from CAPSULE_STORE, which its Caddyfile names as a placeholder.
type pgSite struct {
	dir, home, registry string
	wordcount, slot     string // the capsules' manifests
	deadline            string
	hooks               *webhooks
	dsn                 string
	// bbolt leaves store and store_key out of the config: the tasks go to state_dir.
	bbolt bool
}

func newPGSite(t *testing.T, dsn string) *pgSite {
	t.Helper()
	s := &pgSite{dir: t.TempDir(), dsn: dsn}
	s.home, s.registry = filepath.Join(s.dir, "home"), filepath.Join(s.dir, "registry")
	os.MkdirAll(s.home, 0o755)
	publish(t, s.home, s.registry, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	gt := filepath.Join(t.TempDir(), "gatetool")
	os.MkdirAll(gt, 0o755)
	os.WriteFile(filepath.Join(gt, "murmur.yaml"), []byte("name: gatetool\nversion: 1.0.0\nruntime: tool\ndescription: echoes, spins or asks\n"), 0o644)
	publish(t, s.home, s.registry, gt, "gatetool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))

	wc := filepath.Join(s.dir, "capsules", "wordcount")
	copyDir(t, "../examples/capsules/wordcount", wc)
	os.Remove(filepath.Join(wc, "murmur.lock"))
	os.WriteFile(filepath.Join(wc, "capsule.wasm"), guestbuild.Wasm(t, "../examples/guests/wordcount-capsule"), 0o644)
	s.wordcount = filepath.Join(wc, "murmur.yaml")
	slot := filepath.Join(s.dir, "capsules", "slot")
	gateCapsule(t, slot, "gate-slot", "1.0.0", gateLimits+"lifecycle: {task_acceptance: queue, queue_depth: 4}\n")
	s.slot = filepath.Join(slot, "murmur.yaml")
	dl := filepath.Join(s.dir, "capsules", "deadline")
	gateCapsule(t, dl, "gate-deadline", "1.0.0", fmt.Sprintf("capabilities:\n  limits: {memory_bytes: 134217728, deadline_seconds: %d}\n", pgDeadline))
	s.deadline = filepath.Join(dl, "murmur.yaml")
	s.hooks = startWebhooks(t)
	return s
}

// pgDeadline is gate-deadline's deadline in seconds: a "spin" task it runs fails then.
const pgDeadline = 6

// caddyfile is the gateway's config on port, its admin API on admin, with extra (routes)
// at the end of its site; key is its store_key, the environment's CAPSULE_STORE_KEY when
// "".
func (s *pgSite) caddyfile(port, admin, key, extra string) string {
	key = cmp.Or(key, "{env.CAPSULE_STORE_KEY}")
	// One replica of a fleet of one, named, with a short lease: restarted after a kill it
	// waits out its lease, takes its name back and ends what it ran.
	store := "store {env.CAPSULE_STORE}\n\t\tstore_key " + key + "\n\t\tinstance gw-1\n\t\tlease 2s"
	if s.bbolt {
		store = "# no store: tasks.db in state_dir"
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%[2]s
	default_bind 127.0.0.1
	capsule {
		registry %[3]s
		work_root work
		cache_dir cache
		state_dir state
		# The task store's database, from the environment, and the key sealing push configs.
		%[9]s
		push {
			allow %[4]s
		}
	}
}

http://127.0.0.1:%[1]s {
	# A slot for every load client: a task admitted with a slot free runs where it was
	# admitted, database or not; one queued in the store waits for it to be claimed.
	handle /agents/wordcount/* {
		capsule %[5]s {
			concurrency 16
		}
	}
	# One slot: a task waiting for input holds it, the next one waits.
	handle /agents/slot/* {
		capsule %[6]s {
			concurrency 1
		}
	}
	handle /agents/deadline/* {
		capsule %[8]s
	}
	handle /readyz {
		capsule_ready
	}
	handle /metrics {
		metrics
	}
%[7]s}
`, port, admin, s.registry, s.hooks.srv.URL, s.wordcount, s.slot, extra, s.deadline, store)
}

// env is the environment of a gateway running in dir.
func (s *pgSite) env(dir string) []string {
	return []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"CAPSULE_STORE=" + s.dsn, "CAPSULE_STORE_KEY=" + pgStoreKey}
}

// start runs a gateway on the site (in <dir>/gw) and returns once it serves.
func (s *pgSite) start(t *testing.T) *gateway {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	g := &gateway{dir: filepath.Join(s.dir, "gw"), home: s.home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}, hooks: s.hooks}
	os.MkdirAll(g.dir, 0o755)
	g.caddyfile = filepath.Join(g.dir, "Caddyfile")
	os.WriteFile(g.caddyfile, []byte(s.caddyfile(port, admin, "", "")), 0o644)
	g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir, g.cmd.Env = g.dir, s.env(g.dir)
	waitServing(t, g.cmd, g.logs)
	return g
}

// reload loads the site's config with key and extra (see caddyfile) into the running
// gateway g through its admin API (`caddy reload`), as an operator does after editing the
// Caddyfile.
func (s *pgSite) reload(t *testing.T, g *gateway, key, extra string) {
	t.Helper()
	u, _ := url.Parse(g.base)
	_, admin, _ := strings.Cut(g.admin, ":")
	os.WriteFile(g.caddyfile, []byte(s.caddyfile(u.Port(), admin, key, extra)), 0o644)
	g.reload(t)
}

// second runs another gateway on the site's database, on ports of its own, and returns
// its exit code and output once it ends; one still running after two minutes is killed
// (code -1).
func (s *pgSite) second(t *testing.T) (code int, out string) {
	t.Helper()
	dir := t.TempDir()
	cf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(cf, []byte(s.caddyfile(freePort(t), freePort(t), "", "")), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBin, "run", "--config", cf, "--adapter", "caddyfile")
	cmd.Dir, cmd.Env = dir, s.env(dir)
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, string(b)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(b)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(b)
}

// TestPostgresDurable is TestGateway's kill -9 case on PostgreSQL: a completed task, one
// waiting for input in the only slot of its route, one queued behind it with a push
// config, and a client that streamed the waiting one; the gateway is killed and started
// again on the same database. The completed task is kept, the waiting one ends failed
// (interrupted) and its client resumes with exactly the interruption, the queued one runs
// and its webhook hears every state. A second gateway under the first's instance name
// while the first runs is refused (E-STORE-002), the first serving on.
func TestPostgresDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	db := pgtest.DatabaseName(dsn)
	site := newPGSite(t, dsn)
	g := site.start(t)
	if !strings.Contains(g.logs.String(), "task store on PostgreSQL") || !strings.Contains(g.logs.String(), db) {
		t.Fatalf("the gateway did not say it keeps its tasks in database %s:\n%s", db, g.logs.String())
	}

	killScenario(t, g, site.hooks, "/agents/wordcount/", "/agents/slot/", "interrupted: gateway gw-1 stopped while this task ran", func() {
		if !strings.Contains(g.logs.String(), "task store on PostgreSQL") {
			t.Errorf("the restarted gateway did not open the PostgreSQL store:\n%s", g.logs.String())
		}
		if status, body := readiness(g); status != http.StatusOK {
			t.Errorf("readiness after the restart: %d %s", status, body)
		}
		// Nothing went to a bbolt file beside it.
		if _, err := os.Stat(filepath.Join(g.dir, "state", "tasks.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state/tasks.db: %v, want none (the tasks are in PostgreSQL)", err)
		}
	})

	// Gateways share a database as a fleet, each under its own name: a second one started
	// under the first's name while the first runs waits out the lease, then is refused,
	// naming the instance, and the first serves on.
	code, out := site.second(t)
	if code == 0 || code == -1 || !strings.Contains(out, "E-STORE-002") || !strings.Contains(out, "gw-1") || !strings.Contains(out, "is live") {
		t.Errorf("a second gateway under the first's instance name: exit %d, want a refusal with E-STORE-002 naming gw-1:\n%s", code, out)
	} else if i := strings.Index(out, "E-STORE-002"); i >= 0 {
		t.Logf("the second gateway, refused: …%.300s", out[max(0, i-100):])
	}
	if again := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("still serving here")})); again.Status.State != "completed" || !strings.Contains(again.text(), "3 words") {
		t.Errorf("the first gateway after the second was refused: %v", again)
	}
	if strings.Contains(g.logs.String(), "panic") {
		t.Errorf("the gateway panicked:\n%s", g.logs.String())
	}
}

// sendOutcome is one message/send of a load client.
type sendOutcome struct {
	client     int
	start, end time.Time
	blocking   bool
	id, state  string // acknowledged: the answer is a task
	storeErr   string // refused by the task store: the JSON-RPC error, data included
	admitted   string // the task the refusal names as admitted before its write failed
	dropped    string // no response: the connection failed or closed
	other      string // anything else: another JSON-RPC error, an HTTP status, a bad answer
}

func (o sendOutcome) String() string {
	return fmt.Sprintf("client %d (blocking %v) at %s (%s): task %q %s, store error %q (admitted %q), dropped %q, other %q",
		o.client, o.blocking, o.start.Format("15:04:05.000"), o.end.Sub(o.start).Round(time.Millisecond), o.id, o.state, o.storeErr, o.admitted, o.dropped, o.other)
}

// sendLoad is n clients, each sending message/send requests to one capsule in a loop on
// connections of its own, until halted; every outcome is kept. Even clients send blocking
// requests (acknowledged once the task completed), odd ones non-blocking requests when
// mixed (acknowledged once the task is admitted), blocking ones too otherwise.
type sendLoad struct {
	mu      sync.Mutex
	out     []sendOutcome
	stop    chan struct{}
	wg      sync.WaitGroup
	clients []*http.Client
}

func startSendLoad(t *testing.T, u string, n int, mixed bool) *sendLoad {
	l := &sendLoad{stop: make(chan struct{})}
	for i := range n {
		c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{}}
		l.clients = append(l.clients, c)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				default:
				}
				msg := msg03(fmt.Sprintf("client %d send %d", i, k)) // four words, which wordcount counts
				msg["messageId"] = fmt.Sprintf("load-%d-%d-%d", i, k, time.Now().UnixNano())
				o := sendOutcome{client: i, blocking: !mixed || i%2 == 0, start: time.Now()}
				r, err := rpc(c, u, "", "message/send", map[string]any{"message": msg, "configuration": map[string]any{"blocking": o.blocking}})
				o.end = time.Now()
				switch {
				case errors.Is(err, errTransport):
					o.dropped = err.Error()
				case err != nil:
					o.other = err.Error()
				case r.status != http.StatusOK:
					o.other = fmt.Sprintf("status %d: %.500s", r.status, r.body)
				case r.Error != nil:
					b, _ := json.Marshal(r.Error)
					if strings.Contains(string(r.Error.Data), "task store") {
						o.storeErr = string(b)
						var data struct{ TaskID string }
						json.Unmarshal(r.Error.Data, &data)
						o.admitted = data.TaskID
					} else {
						o.other = string(b)
					}
				default:
					var tk task03
					if err := json.Unmarshal(r.Result, &tk); err != nil || tk.ID == "" {
						o.other = "an answer without a task: " + string(r.Result)
						break
					}
					o.id, o.state = tk.ID, tk.Status.State
				}
				l.mu.Lock()
				l.out = append(l.out, o)
				l.mu.Unlock()
				if o.id == "" {
					// A refusal comes at once: pace the next try rather than spin.
					select {
					case <-l.stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

// outcomes returns what the clients got so far.
func (l *sendLoad) outcomes() []sendOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.out)
}

// each reports whether every client has an outcome since from that ok accepts.
func (l *sendLoad) each(from time.Time, ok func(sendOutcome) bool) bool {
	has := make([]bool, len(l.clients))
	for _, o := range l.outcomes() {
		if !o.start.Before(from) && ok(o) {
			has[o.client] = true
		}
	}
	return !slices.Contains(has, false)
}

// halt stops the clients, waits for their last requests and closes their connections.
func (l *sendLoad) halt() {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	l.wg.Wait()
	for _, c := range l.clients {
		c.CloseIdleConnections()
	}
}

func acked(o sendOutcome) bool { return o.id != "" }

// readiness asks the gateway's capsule_ready route.
func readiness(g *gateway) (status int, body string) {
	resp, err := g.httpClient.Get(g.base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const (
	storeUp     = `capsule_store_up{store="postgres"}`
	storeErrors = `capsule_store_errors_total{store="postgres"}`
	storeWrites = `capsule_store_writes_total{store="postgres"}`
	storeConns  = `capsule_store_connections{store="postgres"}`
	storeKept   = `capsule_store_backlog{store="postgres"}`
	storeLost   = `capsule_store_backlog_dropped_total{store="postgres"}`
)

// TestPostgresOutage stops PostgreSQL for 10 s under load — 8 clients sending
// message/send requests to wordcount in a loop, half of them blocking (acknowledged once
// the task completed), half not (acknowledged once it is admitted) — and starts it again.
// While it is away, sends are refused by the task store (E-STORE-015) within a bound,
// capsule_ready answers 503 and capsule_store_up is 0; once it is back the gateway is
// ready again by itself, without a restart, and sends succeed. Nothing acknowledged is
// lost: every acknowledged task is found afterwards by tasks/get, completed — and so is a
// task acknowledged before the outage that ended while the database was away (a "spin"
// task of gate-deadline, failed by its deadline).
func TestPostgresOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// The shared cluster: no test of this package runs in parallel with this one.
	cluster := pgtest.Shared(t)
	site := newPGSite(t, pgtest.NewDatabase(t))
	g := site.start(t)
	// Whatever happens below, the cluster runs again for the tests after this one (the
	// cleanups run last first: before the gateway is stopped).
	t.Cleanup(func() {
		if err := cluster.Resume(); err != nil {
			t.Error(err)
		}
	})
	if status, body := readiness(g); status != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("readiness before the outage: %d %s", status, body)
	}

	load := startSendLoad(t, g.base+"/agents/wordcount/", 8, true)
	begun := time.Now()
	eventually(t, 2*time.Minute, "every client's sends acknowledged before the outage", func() bool {
		return load.each(begun, acked)
	})
	if up := metricValue(t, g, storeUp); up != 1 {
		t.Errorf("%s = %v before the outage, want 1", storeUp, up)
	}
	errorsBefore := metricValue(t, g, storeErrors)

	// A task acknowledged before the outage, running when it begins, ending in it: the
	// guest spins until gate-deadline's deadline fails the task. Its stream delivers an
	// event once it is durable: once the guest's first chunk came, nothing of it is in flight.
	spinSent := time.Now()
	spinID := startSpinning(t, g, "/agents/deadline/", "")

	stopping := time.Now()
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("PostgreSQL stopped in %s", stopped.Sub(stopping).Round(time.Millisecond))
	// Its state, durable before the stop, is answered from memory: still working, unless
	// the machine was too slow for the deadline to fall in the outage (nothing to see then).
	straddles := true
	if r := g.call(t, "/agents/deadline/", "", "tasks/get", map[string]any{"id": spinID}); r.Error != nil || decodeTask(t, r).Status.State != "working" {
		straddles = false
		// Only a deadline already met excuses it: before that, the task had no reason to end.
		if since := time.Since(spinSent); since < pgDeadline*time.Second {
			t.Errorf("the spin task was no longer working %s after it was sent, before its deadline of %d s: %+v %s", since.Round(time.Millisecond), pgDeadline, r.Error, r.Result)
		} else {
			t.Logf("the spin task was no longer working when the outage began (%s after it was sent): %+v %s", since.Round(time.Millisecond), r.Error, r.Result)
		}
	}

	var notReady string
	eventually(t, 30*time.Second, "capsule_ready answering 503 during the outage", func() bool {
		status, body := readiness(g)
		notReady = body
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(notReady, `"ready":false`) || !strings.Contains(notReady, "E-STORE-015") {
		t.Errorf("readiness during the outage: %s, want it to name E-STORE-015", notReady)
	}
	eventually(t, 30*time.Second, storeUp+" = 0 during the outage", func() bool { return metricValue(t, g, storeUp) == 0 })
	eventually(t, 30*time.Second, "every client refused by the task store during the outage", func() bool {
		return load.each(stopped, func(o sendOutcome) bool { return o.storeErr != "" })
	})
	// The outage lasts 10 s, and until the spin task has met its deadline; readiness says
	// so all along.
	trap := `capsule_guest_traps_total{artifact="gatetool",capsule="gate-deadline",reason="deadline",role="tool"}`
	var slowestProbe time.Duration
	for time.Since(stopped) < 10*time.Second || straddles && metricValue(t, g, trap) < 1 {
		if time.Since(stopped) > time.Minute {
			t.Fatalf("the spin task did not meet its deadline of %d s in a minute", pgDeadline)
		}
		start := time.Now()
		if status, body := readiness(g); status != http.StatusServiceUnavailable {
			t.Errorf("readiness during the outage, %s after the stop: %d %s", time.Since(stopped).Round(time.Millisecond), status, body)
		}
		slowestProbe = max(slowestProbe, time.Since(start))
		<-time.After(100 * time.Millisecond)
	}

	resuming := time.Now()
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	eventually(t, time.Minute, "capsule_ready answering 200 after the outage, without a restart", func() bool {
		status, _ := readiness(g)
		return status == http.StatusOK
	})
	ready := time.Now()
	// Ready means a send is taken: the writes the store kept while the database was away
	// are written by then (until they are, sends are refused). The backlog only grows
	// while the database is away, so one seen now was there when readiness said 200.
	if m := scrape(t, g); m[storeKept] > 0 && m[storeUp] == 1 {
		t.Errorf("capsule_ready answered 200 while %s = %v (message/send refuses until the kept writes are written)", storeKept, m[storeKept])
	}
	t.Logf("PostgreSQL away %s (stop %s, resume %s); ready again %s after the resume; slowest readiness answer during the outage %s",
		resumed.Sub(stopping).Round(time.Millisecond), stopped.Sub(stopping).Round(time.Millisecond), resumed.Sub(resuming).Round(time.Millisecond),
		ready.Sub(resumed).Round(time.Millisecond), slowestProbe.Round(time.Millisecond))
	eventually(t, 30*time.Second, storeUp+" = 1 after the outage", func() bool { return metricValue(t, g, storeUp) == 1 })
	eventually(t, 2*time.Minute, "every client's sends acknowledged again after the outage", func() bool {
		return load.each(ready, acked)
	})
	load.halt()

	if n := metricValue(t, g, storeErrors); n <= errorsBefore || n == 0 {
		t.Errorf("%s = %v after the outage, %v before: want it to have grown", storeErrors, n, errorsBefore)
	}
	if n := metricValue(t, g, storeWrites); n == 0 {
		t.Errorf("%s = 0", storeWrites)
	}
	// What the store kept while the database was away is written: nothing kept, nothing dropped.
	eventually(t, 30*time.Second, storeKept+" = 0 after the outage", func() bool { return metricValue(t, g, storeKept) == 0 })
	if n := metricValue(t, g, storeLost); n != 0 {
		t.Errorf("%s = %v, want 0", storeLost, n)
	}

	// What each send got, by when it was sent: before the stop, acknowledged; while the
	// database was away, acknowledged (its writes committed before the stop took effect)
	// or refused by the store with E-STORE-015, in a bounded time; after readiness came
	// back, acknowledged.
	var acks, refusals, late []sendOutcome
	var slowest time.Duration
	for _, o := range load.outcomes() {
		took := o.end.Sub(o.start)
		switch {
		case o.other != "" || o.dropped != "":
			t.Errorf("a send neither acknowledged nor refused by the store: %v", o)
		case o.storeErr != "":
			refusals = append(refusals, o)
			slowest = max(slowest, took)
			if o.end.Before(stopping) {
				t.Errorf("refused before the outage: %v", o)
			}
			if !strings.Contains(o.storeErr, "E-STORE-015") || !strings.Contains(o.storeErr, `"storeCode":"E-STORE-015"`) ||
				!strings.Contains(o.storeErr, "-32603") || !strings.Contains(o.storeErr, "the task store could not record the task") {
				t.Errorf("a refusal that does not name the store's unreachable database (E-STORE-015): %v", o)
			}
			if took >= 10*time.Second {
				t.Errorf("a refusal took %s, want under 10 s: %v", took, o)
			}
			if o.start.After(ready) {
				late = append(late, o)
			}
		default:
			acks = append(acks, o)
			if o.blocking && o.state != "completed" || !o.blocking && !slices.Contains([]string{"submitted", "working", "completed"}, o.state) {
				t.Errorf("a send acknowledged in state %q: %v", o.state, o)
			}
		}
	}
	t.Logf("%d sends acknowledged, %d refused by the store (slowest refusal %s), %d refused after readiness came back",
		len(acks), len(refusals), slowest.Round(time.Millisecond), len(late))
	for _, o := range late {
		t.Errorf("refused after capsule_ready answered 200 again: %v", o)
	}

	// None lost: every acknowledged task is found, completed with its answer (the
	// non-blocking ones once they have run) — and so is every task a refusal names as
	// admitted before its write failed (one in flight when the database went) — the spin
	// task failed by its deadline.
	type want struct {
		path, state, text string
		sent              sendOutcome
	}
	pending := map[string]want{}
	admitted := 0
	for _, o := range acks {
		pending[o.id] = want{"/agents/wordcount/", "completed", "4 words", o}
	}
	for _, o := range refusals {
		if o.admitted != "" {
			pending[o.admitted] = want{"/agents/wordcount/", "completed", "4 words", o}
			admitted++
		}
	}
	if straddles {
		pending[spinID] = want{"/agents/deadline/", "failed", "deadline", sendOutcome{client: -1, id: spinID, state: "working", start: spinSent, end: spinSent}}
	}
	answers := map[string]string{}
	for deadline := time.Now().Add(30 * time.Second); len(pending) > 0 && time.Now().Before(deadline); {
		for id, w := range pending {
			r := g.call(t, w.path, "", "tasks/get", map[string]any{"id": id})
			if r.Error != nil || r.status != 200 {
				answers[id] = fmt.Sprintf("status %d, error %+v", r.status, r.Error)
				continue
			}
			tk := decodeTask(t, r)
			answers[id] = tk.String()
			if tk.Status.State == w.state && strings.Contains(tk.String(), w.text) {
				delete(pending, id)
			}
		}
		if len(pending) > 0 {
			<-time.After(250 * time.Millisecond)
		}
	}
	for id, w := range pending {
		t.Errorf("sent %v; 30 s after the outage tasks/get %s answers %s, want %s (%q)", w.sent, id, answers[id], w.state, w.text)
	}
	t.Logf("found every task: %d acknowledged, %d named admitted by a refusal, the spin task (checked: %v)", len(acks), admitted, straddles)
	if strings.Contains(g.logs.String(), "panic") {
		t.Errorf("the gateway panicked:\n%s", g.logs.String())
	}
}

// TestPostgresReloads reloads the gateway's config three times under light load and
// checks that the store is opened once and kept across the reloads — every connection to
// the database is the store's, no more than its pool and lock hold — and that the
// gateway's goroutines come back to their level before.
func TestPostgresReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	cluster := pgtest.Shared(t)
	dsn := pgtest.NewDatabase(t)
	db := pgtest.DatabaseName(dsn)
	site := newPGSite(t, dsn)
	g := site.start(t)
	// The store's pool holds up to 8 connections (pgstore's default), its lock one more.
	const most = 8 + 1

	// Connections to the database, all the store's: PostgreSQL's count matches the
	// store's own (capsule_store_connections) once neither is in the middle of a change.
	var last int
	consistent := func(what string) {
		t.Helper()
		eventually(t, 30*time.Second, what+": PostgreSQL's connection count equal to the store's", func() bool {
			n, err := cluster.Connections(db)
			if err != nil {
				t.Fatal(err)
			}
			if n > most {
				t.Fatalf("%s: %d connections to the database, want at most %d", what, n, most)
			}
			last = n
			return float64(n) == metricValue(t, g, storeConns)
		})
	}
	goroutines := func() float64 { return metricValue(t, g, "go_goroutines") }

	// A first task stages the capsule and opens the pool's first connection; then the
	// gateway idles.
	if tk := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("one two three")})); tk.Status.State != "completed" {
		t.Fatalf("first task: %v", tk)
	}
	consistent("before the load")
	connsBefore, goroutinesBefore := last, goroutines()

	load := startSendLoad(t, g.base+"/agents/wordcount/", 3, false)
	begun := time.Now()
	eventually(t, 2*time.Minute, "every client's sends acknowledged before the reloads", func() bool { return load.each(begun, acked) })
	consistent("under load")
	perReload := []int{last}
	for i := 1; i <= 3; i++ {
		// A changed config: a route naming the reload; the last one changes store_key too,
		// which keeps the store (its pool is the database's) with the new key.
		key := ""
		if i == 3 {
			key = "e2e-another-store-key-0123456789abcdef-0123"
		}
		site.reload(t, g, key, fmt.Sprintf("\thandle /reload {\n\t\trespond \"reload %d\" 200\n\t}\n", i))
		reloaded := time.Now()
		resp, err := g.httpClient.Get(g.base + "/reload")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("reload %d", i); string(body) != want {
			t.Fatalf("after reload %d, /reload answers %q, want %q", i, body, want)
		}
		eventually(t, 2*time.Minute, fmt.Sprintf("every client's sends acknowledged after reload %d", i), func() bool { return load.each(reloaded, acked) })
		consistent(fmt.Sprintf("after reload %d", i))
		perReload = append(perReload, last)
	}
	load.halt()
	g.httpClient.CloseIdleConnections()

	var acks, dropped int
	for _, o := range load.outcomes() {
		switch {
		case o.storeErr != "":
			t.Errorf("refused by the store: %v", o)
		case o.dropped != "":
			// A POST on a connection the reload closed is not retried by the client.
			dropped++
		case o.other != "":
			t.Errorf("a send failed: %v", o)
		default:
			acks++
			if o.state != "completed" {
				t.Errorf("a blocking send acknowledged in state %q: %v", o.state, o)
			}
		}
	}
	t.Logf("%d sends acknowledged, %d lost with connections the reloads closed", acks, dropped)

	// The store was opened once, by the first config, and handed on by each reload.
	if n := strings.Count(g.logs.String(), "task store on PostgreSQL"); n != 1 {
		t.Errorf("the store was opened %d times, want once (kept across reloads)", n)
	}
	if strings.Contains(g.logs.String(), "E-STORE-002") || strings.Contains(g.logs.String(), "panic") {
		t.Errorf("the gateway's log names E-STORE-002 or a panic:\n%s", g.logs.String())
	}
	consistent("after the load")
	t.Logf("connections to the database: %d idle before the load, %d under load then after each reload %v, %d after the load (the pool closes idle ones after a minute)",
		connsBefore, perReload[0], perReload[1:], last)

	var now float64
	eventually(t, 30*time.Second, fmt.Sprintf("goroutines back to %v ± 20", goroutinesBefore), func() bool {
		now = goroutines()
		return now >= goroutinesBefore-20 && now <= goroutinesBefore+20
	})
	t.Logf("goroutines: %v before the load and the reloads, %v after", goroutinesBefore, now)
}

// TestPostgresStoreSwitchOnReload: a reload that moves the tasks from tasks.db to
// PostgreSQL moves every capsule, those the reload keeps included: a task sent after it
// is in the database, one sent before is not, and readiness watches the database (503
// while it is stopped).
func TestPostgresStoreSwitchOnReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dsn := pgtest.NewDatabase(t)
	site := newPGSite(t, dsn)
	site.bbolt = true
	g := site.start(t)
	before := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("one two")}))
	if before.Status.State != "completed" {
		t.Fatalf("before the reload: %v", before)
	}
	site.bbolt = false
	site.reload(t, g, "", "")
	after := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("one two three")}))
	if after.Status.State != "completed" || !strings.Contains(after.text(), "3 words") {
		t.Fatalf("after the reload: %v", after)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, tt := range []struct {
		id   string
		want bool
	}{{before.ID, false}, {after.ID, true}} {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM capsulegate_tasks WHERE id = $1", tt.id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != tt.want {
			t.Errorf("task %s in the database: %d rows, want it there: %v", tt.id, n, tt.want)
		}
	}
	if status, body := readiness(g); status != http.StatusOK {
		t.Errorf("readiness after the switch: %d %s", status, body)
	}
	// Readiness asks the database now: with PostgreSQL stopped it answers 503, naming it.
	cluster := pgtest.Shared(t)
	t.Cleanup(func() {
		if err := cluster.Resume(); err != nil {
			t.Error(err)
		}
	})
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	var body string
	eventually(t, 30*time.Second, "capsule_ready answering 503 with PostgreSQL stopped", func() bool {
		var status int
		status, body = readiness(g)
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, "E-STORE-015") {
		t.Errorf("readiness with PostgreSQL stopped: %s, want it to name E-STORE-015", body)
	}
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "capsule_ready answering 200 once PostgreSQL is back", func() bool {
		status, _ := readiness(g)
		return status == http.StatusOK
	})
}
