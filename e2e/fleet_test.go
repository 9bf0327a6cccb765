package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// recorder is the loopback server every replica's guest reports its runs to: the task
// "barrier <recorder>/run/<tag>" makes the gate capsule's tool GET that URL, which the
// recorder holds a moment (so that runs overlapping in time would show) and answers
// "ran <tag>"; /hold/<tag> is held until the test releases it.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	runs map[string][]span
	hold map[string]chan struct{}
	got  chan string // tags of held requests, as they arrive
}

// span is one run as the recorder saw it: when its request came and when it was answered.
type span struct{ start, end time.Time }

func startRecorder(t *testing.T) *recorder {
	r := &recorder{runs: map[string][]span{}, hold: map[string]chan struct{}{}, got: make(chan string, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		kind, tag, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		start := time.Now()
		switch kind {
		case "run":
			time.Sleep(20 * time.Millisecond) // the run's work: a window in which overlaps show
		case "hold":
			r.mu.Lock()
			ch := r.hold[tag]
			if ch == nil {
				ch = make(chan struct{})
				r.hold[tag] = ch
			}
			r.mu.Unlock()
			r.got <- tag
			select {
			case <-ch:
			case <-req.Context().Done():
			}
		}
		fmt.Fprintf(w, "ran %s", tag)
		r.mu.Lock()
		r.runs[tag] = append(r.runs[tag], span{start, time.Now()})
		r.mu.Unlock()
	}))
	t.Cleanup(func() {
		r.mu.Lock()
		for _, ch := range r.hold {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		r.mu.Unlock()
		r.srv.Close()
	})
	return r
}

// release answers the held request tag.
func (r *recorder) release(tag string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch := r.hold[tag]; ch != nil {
		close(ch)
		r.hold[tag] = make(chan struct{}) // a later hold of the tag waits again
	}
}

func (r *recorder) spans() map[string][]span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]span, len(r.runs))
	for k, v := range r.runs {
		out[k] = slices.Clone(v)
	}
	return out
}

// fleetSite is several gateways on one PostgreSQL database, each serving the gate-fleet
// capsule at /agents/fleet/, and a front Caddy that balances round robin over them.
type fleetSite struct {
	dir, home, registry, dsn string
	rec                      *recorder
	gws                      []*gateway
	names                    []string
	front                    string // http://127.0.0.1:<port>/edge
}

// newFleetSite lays out the registry and one capsule folder per version (manifests
// naming the recorder as the only host their tool may reach).
func newFleetSite(t *testing.T) *fleetSite {
	t.Helper()
	s := &fleetSite{dir: t.TempDir(), dsn: pgtest.NewDatabase(t), rec: startRecorder(t)}
	s.home, s.registry = filepath.Join(s.dir, "home"), filepath.Join(s.dir, "registry")
	os.MkdirAll(s.home, 0o755)
	gt := filepath.Join(t.TempDir(), "gatetool")
	os.MkdirAll(gt, 0o755)
	os.WriteFile(filepath.Join(gt, "murmur.yaml"), []byte("name: gatetool\nversion: 1.0.0\nruntime: tool\ndescription: echoes, spins or asks\n"), 0o644)
	publish(t, s.home, s.registry, gt, "gatetool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))
	return s
}

// capsule writes gate-fleet at version into its own folder and returns its manifest.
func (s *fleetSite) capsule(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(s.dir, "capsules", version)
	gateCapsule(t, dir, "gate-fleet", version, fmt.Sprintf(
		"capabilities:\n  network: {allow: [\"%s\"]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 300}\nlifecycle: {task_acceptance: queue, queue_depth: 32}\n", s.rec.srv.URL))
	return filepath.Join(dir, "murmur.yaml")
}

// start runs replica name serving manifest with options (app options, such as work_root)
// and concurrency slots, and returns it once it serves.
func (s *fleetSite) start(t *testing.T, name, manifest, options string, concurrency int) *gateway {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	g := &gateway{dir: filepath.Join(s.dir, name), home: s.home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	os.MkdirAll(g.dir, 0o755)
	g.caddyfile = filepath.Join(g.dir, "Caddyfile")
	cf := fmt.Sprintf(`{
	admin 127.0.0.1:%[2]s
	default_bind 127.0.0.1
	# The front proxy's forwarded headers are believed, so cards name the front's URL.
	servers {
		trusted_proxies static 127.0.0.1/32
	}
	capsule {
		registry %[3]s
		cache_dir cache
		state_dir state
		store {env.CAPSULE_STORE}
		store_key {env.CAPSULE_STORE_KEY}
		instance %[5]s
		%[6]s
	}
}

http://127.0.0.1:%[1]s {
	handle_path /agents/fleet/* {
		capsule %[4]s {
			concurrency %[7]d
		}
	}
	handle /readyz {
		capsule_ready
	}
	handle /metrics {
		metrics
	}
}
`, port, admin, s.registry, manifest, name, options, concurrency)
	os.WriteFile(g.caddyfile, []byte(cf), 0o644)
	g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir = g.dir
	g.cmd.Env = []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH"),
		"XDG_DATA_HOME=" + filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.dir, "config"),
		"CAPSULE_STORE=" + s.dsn, "CAPSULE_STORE_KEY=" + pgStoreKey}
	waitServing(t, g.cmd, g.logs)
	s.gws, s.names = append(s.gws, g), append(s.names, name)
	return g
}

// startFront runs the front Caddy: /edge/* balanced round robin over the replicas, with
// no sticky sessions, active health checks on their readiness, and retries of a request
// whose replica cannot be dialed.
func (s *fleetSite) startFront(t *testing.T) {
	t.Helper()
	port := freePort(t)
	var ups []string
	for _, g := range s.gws {
		ups = append(ups, strings.TrimPrefix(g.base, "http://"))
	}
	serveSites(t, fmt.Sprintf(`http://127.0.0.1:%s {
	handle_path /edge/* {
		reverse_proxy %s {
			lb_policy round_robin
			lb_try_duration 10s
			lb_try_interval 100ms
			fail_duration 5s
			health_uri /readyz
			health_interval 1s
			flush_interval -1
			header_up Host {upstream_hostport}
			header_up X-Forwarded-Prefix /edge
		}
	}
}
`, port, strings.Join(ups, " ")))
	s.front = "http://127.0.0.1:" + port + "/edge"
}

// sent is one send of a load client: its tag (the recorder's name of its run), its
// context when it shares one, and what it got.
type sent struct {
	client, k    int
	tag, context string
	blocking     bool
	id, state    string
	err          string
}

// runLoad sends perClient tasks from each of goClients a2a-go clients and jsClients
// clients of the JS SDK, all through the front; even clients send non-blocking tasks, one
// after the other, into a context of their own; odd ones blocking tasks, each in a new
// context. during, when set, runs once the load is under way. It returns every send.
func (s *fleetSite) runLoad(t *testing.T, phase string, goClients, jsClients, perClient int, during func()) []sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Minute}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, s.front+"/agents/fleet/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(card.SupportedInterfaces[0].URL, s.front+"/agents/fleet") {
		t.Fatalf("the card through the front names %s, not the front's URL", card.SupportedInterfaces[0].URL)
	}
	var mu sync.Mutex
	var out []sent
	var wg sync.WaitGroup
	for c := range goClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
			if err != nil {
				mu.Lock()
				out = append(out, sent{client: c, err: err.Error()})
				mu.Unlock()
				return
			}
			contextID := ""
			if c%2 == 0 {
				contextID = fmt.Sprintf("%s-go%d-%d", phase, c, time.Now().UnixNano())
			}
			for k := range perClient {
				sn := sent{client: c, k: k, tag: fmt.Sprintf("%s-go%d-%d", phase, c, k), context: contextID, blocking: c%2 == 1}
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("barrier "+s.rec.srv.URL+"/run/"+sn.tag))
				msg.ContextID = contextID
				res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: !sn.blocking}})
				switch task, ok := res.(*a2a.Task); {
				case err != nil:
					sn.err = err.Error()
				case !ok:
					sn.err = fmt.Sprintf("an answer that is not a task: %T", res)
				default:
					sn.id, sn.state = string(task.ID), string(task.Status.State)
				}
				mu.Lock()
				out = append(out, sn)
				mu.Unlock()
			}
		}()
	}
	if jsClients > 0 {
		node, dir := jsSDK(t, "testdata/jsparts")
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, node, "fleet.mjs", s.front+"/agents/fleet/.well-known/agent-card.json", s.rec.srv.URL,
				fmt.Sprint(goClients), fmt.Sprint(goClients+jsClients), fmt.Sprint(perClient), phase)
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				mu.Lock()
				out = append(out, sent{client: goClients, err: "node fleet.mjs: " + err.Error()})
				mu.Unlock()
				return
			}
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l struct {
					Client, K                      int
					Tag, Context, ID, State, Error string
					Blocking                       bool
				}
				if json.Unmarshal(sc.Bytes(), &l) != nil {
					continue
				}
				mu.Lock()
				out = append(out, sent{client: l.Client, k: l.K, tag: l.Tag, context: l.Context, blocking: l.Blocking, id: l.ID, state: l.State, err: l.Error})
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				mu.Lock()
				out = append(out, sent{client: goClients, err: fmt.Sprintf("node fleet.mjs: %v: %s", err, stderr.String())})
				mu.Unlock()
			}
		}()
	}
	if during != nil {
		during()
	}
	wg.Wait()
	return out
}

// task10 is the part of a 1.0 Task the checks read.
type task10 struct {
	ID, ContextID string
	Status        struct {
		State   string
		Message *struct{ Parts []struct{ Text string } }
	}
	Artifacts []struct{ Parts []struct{ Text string } }
}

func (tk task10) texts() string {
	var b strings.Builder
	if tk.Status.Message != nil {
		for _, p := range tk.Status.Message.Parts {
			b.WriteString(p.Text)
		}
	}
	for _, a := range tk.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// listAll reads every task through g with ListTasks (1.0, JSON-RPC), page by page.
func listAll(t *testing.T, g *gateway) []task10 {
	t.Helper()
	var all []task10
	token := ""
	for {
		params := map[string]any{"pageSize": 100, "includeArtifacts": true}
		if token != "" {
			params["pageToken"] = token
		}
		r := g.call(t, "/agents/fleet/", "1.0", "ListTasks", params)
		if r.Error != nil || r.status != 200 {
			t.Fatalf("ListTasks through %s: %d %+v", g.base, r.status, r.Error)
		}
		var page struct {
			Tasks         []task10
			NextPageToken string
		}
		if err := json.Unmarshal(r.Result, &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Tasks...)
		if page.NextPageToken == "" {
			return all
		}
		token = page.NextPageToken
	}
}

// settle waits until no task listed through g is unfinished.
func settle(t *testing.T, g *gateway, within time.Duration) []task10 {
	t.Helper()
	var all []task10
	eventually(t, within, "every task finished", func() bool {
		all = listAll(t, g)
		return !slices.ContainsFunc(all, func(tk task10) bool {
			s := tk.Status.State
			return s != "TASK_STATE_COMPLETED" && s != "TASK_STATE_FAILED" && s != "TASK_STATE_CANCELED" && s != "TASK_STATE_REJECTED"
		})
	})
	return all
}

// checkLoad holds the load's outcome against what every replica lists and what the
// recorder saw: every acknowledged task listed exactly once through each replica, ended
// completed — or, when killed names a replica, failed "interrupted" by its stop; no task
// ran twice; a context's tasks ran one at a time in the order sent. It returns the
// acknowledged sends.
func (s *fleetSite) checkLoad(t *testing.T, sends []sent, replicas []*gateway, killed string) []sent {
	t.Helper()
	var acked []sent
	errors := 0
	for _, sn := range sends {
		if sn.id != "" {
			acked = append(acked, sn)
		} else {
			errors++
			if killed == "" {
				t.Errorf("send %s (client %d) failed: %s", sn.tag, sn.client, sn.err)
			}
		}
	}
	t.Logf("%d sends, %d acknowledged, %d refused or lost", len(sends), len(acked), errors)
	interrupted := "interrupted: gateway " + killed + " stopped while this task ran"
	byID := map[string]sent{}
	for _, sn := range acked {
		byID[sn.id] = sn
	}
	settle(t, replicas[0], 3*time.Minute)
	failed := 0
	for _, g := range replicas {
		seen := map[string]int{}
		for _, tk := range listAll(t, g) {
			seen[tk.ID]++
			sn, ok := byID[tk.ID]
			if !ok {
				continue
			}
			switch {
			case tk.Status.State == "TASK_STATE_COMPLETED" && strings.Contains(tk.texts(), "ran "+sn.tag):
			case killed != "" && tk.Status.State == "TASK_STATE_FAILED" && strings.Contains(tk.texts(), interrupted):
				failed++
			default:
				t.Errorf("through %s, task %s (%s) ended %s: %s", g.base, tk.ID, sn.tag, tk.Status.State, tk.texts())
			}
		}
		for id, sn := range byID {
			if seen[id] != 1 {
				t.Errorf("through %s, acknowledged task %s (%s) listed %d times", g.base, id, sn.tag, seen[id])
			}
		}
	}
	t.Logf("%d acknowledged tasks ended interrupted (counted through each of %d replicas)", failed, len(replicas))
	// What the recorder saw: a run at most once per task, exactly once for a completed
	// one; a context's runs apart in time and in the order sent.
	spans := s.rec.spans()
	contexts := map[string][]sent{}
	for _, sn := range acked {
		if n := len(spans[sn.tag]); n > 1 {
			t.Errorf("task %s (%s) ran %d times", sn.id, sn.tag, n)
		}
		if sn.context != "" {
			contexts[sn.context] = append(contexts[sn.context], sn)
		}
	}
	for c, sns := range contexts {
		slices.SortFunc(sns, func(a, b sent) int { return a.k - b.k })
		var last *span
		lastTag := ""
		for _, sn := range sns {
			runs := spans[sn.tag]
			if len(runs) == 0 {
				continue // ended before it ran (interrupted while queued on the killed replica, or canceled)
			}
			if last != nil && runs[0].start.Before(last.end) {
				t.Errorf("context %s: %s started at %s, before %s (sent before it) ended at %s", c, sn.tag,
					runs[0].start.Format("15:04:05.000"), lastTag, last.end.Format("15:04:05.000"))
			}
			last, lastTag = &runs[0], sn.tag
		}
	}
	return acked
}

// TestFleet runs three gateways on one PostgreSQL database behind a front Caddy that
// balances round robin, without sticky sessions, and loads them with the official Go and
// JS SDKs: 1,000 tasks from 50 clients, half of them sending non-blocking tasks into
// their own context. Every acknowledged task is listed exactly once through each
// replica; none ran twice; a context's tasks never overlapped and ran in the order sent.
// A stream resumed with Last-Event-ID through another replica gets exactly the events it
// missed; a cancel sent to another replica stops the task. Then the same load with one
// replica killed (kill -9) mid-load and restarted later: its running tasks end failed
// "interrupted: gateway gw-3 stopped while this task ran" on a survivor, within the
// lease, its queued ones run on the survivors.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three gateways")
	}
	pgtest.Need(t)
	// Parallel with the package's other long tests that mostly wait: the package's wall
	// time is near its bound (docs/benchmarks.md, the test suite's time). Parallel tests
	// start after the serial ones, TestPostgresOutage among them: the shared cluster is up.
	t.Parallel()
	s := newFleetSite(t)
	manifest := s.capsule(t, "1.0.0")
	// One work_root for all: the storage an operator mounts on every replica, so a
	// context's files follow it from replica to replica.
	work := "work_root " + filepath.Join(s.dir, "work")
	for _, name := range []string{"gw-1", "gw-2", "gw-3"} {
		s.start(t, name, manifest, work, 4)
	}
	s.startFront(t)
	gw1, gw2, gw3 := s.gws[0], s.gws[1], s.gws[2]
	// Every replica shows its part in the fleet from its start, before any task.
	for _, g := range s.gws {
		got := scrape(t, g)
		for _, series := range []string{`capsule_fleet_claims_total{capsule="gate-fleet"}`, `capsule_fleet_failovers_total{capsule="gate-fleet"}`,
			`capsule_fleet_leases{capsule="gate-fleet"}`} {
			if v, ok := got[series]; !ok || v != 0 {
				t.Errorf("%s on %s at start: %v (present %v), want 0", series, g.base, v, ok)
			}
		}
	}

	t.Run("resume through another replica", func(t *testing.T) {
		// Streamed from gw-1, which runs it (a new context, a free slot), held at the
		// recorder; resumed through gw-2 after the first event; both streams then get the
		// same events, ids and data, once each.
		first := gw1.stream(t, "/agents/fleet/", "", "message/stream", map[string]any{"message": msg03("barrier " + s.rec.srv.URL + "/hold/resume")})
		ev := <-first
		if <-s.rec.got != "resume" {
			t.Fatal("another run reached the recorder")
		}
		var snap struct{ Result struct{ ID string } }
		json.Unmarshal(ev.data, &snap)
		if ev.id == 0 || snap.Result.ID == "" {
			t.Fatalf("first event %+v", ev)
		}
		resumed := gw2.streamWith(t, "/agents/fleet/", "", "tasks/resubscribe", map[string]any{"id": snap.Result.ID}, "Last-Event-ID", fmt.Sprint(ev.id))
		s.rec.release("resume")
		var rest, again []sseEvent
		for e := range first {
			rest = append(rest, e)
		}
		for e := range resumed {
			again = append(again, e)
		}
		if len(rest) == 0 || len(again) != len(rest) {
			t.Fatalf("after event %d: gw-1 sent %d events, gw-2 resumed with %d:\n%v\n%v", ev.id, len(rest), len(again), rest, again)
		}
		for i := range rest {
			if rest[i].id != again[i].id || string(rest[i].data) != string(again[i].data) {
				t.Errorf("event %d: gw-1 %d %s, gw-2 %d %s", i, rest[i].id, rest[i].data, again[i].id, again[i].data)
			}
		}
	})

	t.Run("cancel through another replica", func(t *testing.T) {
		task := decodeTask(t, gw1.call(t, "/agents/fleet/", "", "message/send", map[string]any{"message": msg03("barrier " + s.rec.srv.URL + "/hold/cancel"),
			"configuration": map[string]any{"blocking": false}}))
		if <-s.rec.got != "cancel" {
			t.Fatal("another run reached the recorder")
		}
		got := decodeTask(t, gw2.call(t, "/agents/fleet/", "", "tasks/cancel", map[string]any{"id": task.ID}))
		if got.Status.State != "canceled" {
			t.Fatalf("canceled through gw-2: %v", got)
		}
		// It stopped where it ran: gw-1's slot is free again, and every replica reads it canceled.
		eventually(t, 30*time.Second, "gw-1's task stopped", func() bool {
			return metricValue(t, gw1, `capsule_tasks_in_flight{capsule="gate-fleet"}`) == 0
		})
		for _, g := range s.gws {
			if tk := decodeTask(t, g.call(t, "/agents/fleet/", "", "tasks/get", map[string]any{"id": task.ID})); tk.Status.State != "canceled" {
				t.Errorf("through %s: %v", g.base, tk)
			}
		}
	})

	t.Run("a context's files follow it", func(t *testing.T) {
		// One work_root for all: whichever replica runs the second task finds the file the
		// first one kept (a fleet without shared storage refuses it: TestFleetRollingUpgrade).
		const ctx = "ctx-files"
		if kept := decodeTask(t, gw1.call(t, "/agents/fleet/", "", "message/send", map[string]any{"message": msg03("keep hello", "", ctx)})); kept.Status.State != "completed" {
			t.Fatalf("keep: %v", kept)
		}
		for _, g := range []*gateway{gw2, gw3, gw1} {
			got := decodeTask(t, g.call(t, "/agents/fleet/", "", "message/send", map[string]any{"message": msg03("recall", "", ctx)}))
			if got.Status.State != "completed" || !strings.Contains(got.text(), "hello") {
				t.Errorf("recall through %s: %v", g.base, got)
			}
		}
	})

	t.Run("1000 tasks", func(t *testing.T) {
		sends := s.runLoad(t, "a", 40, 10, 20, nil)
		if len(sends) != 1000 {
			t.Errorf("%d sends, want 1000", len(sends))
		}
		acked := s.checkLoad(t, sends, s.gws, "")
		claims := 0.0
		for _, g := range s.gws {
			claims += metricValue(t, g, `capsule_fleet_claims_total{capsule="gate-fleet"}`)
		}
		t.Logf("%d acknowledged; claims across the replicas: %v", len(acked), claims)
	})

	t.Run("1000 tasks, one replica killed", func(t *testing.T) {
		// A task gw-3 runs when it is killed: held at the recorder.
		held := decodeTask(t, gw3.call(t, "/agents/fleet/", "", "message/send", map[string]any{"message": msg03("barrier " + s.rec.srv.URL + "/hold/killed"),
			"configuration": map[string]any{"blocking": false}}))
		if <-s.rec.got != "killed" {
			t.Fatal("another run reached the recorder")
		}
		var failover time.Duration
		sends := s.runLoad(t, "b", 40, 10, 20, func() {
			eventually(t, 2*time.Minute, "a third of the load run", func() bool {
				n := 0
				for tag := range s.rec.spans() {
					if strings.HasPrefix(tag, "b-") {
						n++
					}
				}
				return n >= 300
			})
			gw3.cmd.Process.Kill()
			gw3.cmd.Wait()
			killed := time.Now()
			// The first interrupted task answered through a survivor: its stream ends with
			// the interruption.
			_, final := streamEnd(gw1.stream(t, "/agents/fleet/", "", "tasks/resubscribe", map[string]any{"id": held.ID}))
			failover = time.Since(killed)
			if final != "failed" {
				t.Errorf("the held task's stream through gw-1 ended %q", final)
			}
			t.Logf("failover: the held task answered failed through gw-1 %s after the kill", failover.Round(time.Millisecond))
		})
		if failover > 15*time.Second {
			t.Errorf("failover took %s, want at most 15 s", failover)
		}
		got := decodeTask(t, gw2.call(t, "/agents/fleet/", "", "tasks/get", map[string]any{"id": held.ID}))
		if got.Status.State != "failed" || !strings.Contains(got.String(), "interrupted: gateway gw-3 stopped while this task ran") {
			t.Errorf("the held task through gw-2: %v", got)
		}
		if n := metricValue(t, gw1, `capsule_fleet_failovers_total{capsule="gate-fleet"}`) + metricValue(t, gw2, `capsule_fleet_failovers_total{capsule="gate-fleet"}`); n < 1 {
			t.Errorf("failovers counted by the survivors: %v", n)
		}
		// Restarted later, under its name: it takes its name back, and the load is checked
		// through every replica, the restarted one included.
		gw3.killAndRestart(t)
		s.checkLoad(t, sends, s.gws, "gw-3")
		if got := decodeTask(t, gw3.call(t, "/agents/fleet/", "", "tasks/get", map[string]any{"id": held.ID})); got.Status.State != "failed" {
			t.Errorf("the held task through the restarted gw-3: %v", got)
		}
	})
}

// TestFleetRollingUpgrade runs replica gw-a on version 1.0.0 of a capsule and gw-b on
// 2.0.0, on one database, each with a work_root of its own. Tasks admitted by gw-a wait
// for it while it lives, even with gw-b idle; once gw-a stopped, no live replica serves
// 1.0.0 and gw-b runs them (task_versions served, the default). A context whose files
// gw-a wrote fails on gw-b with E-RUN-014 naming gw-a, never with a silently missing file.
func TestFleetRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two gateways")
	}
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	pgtest.Need(t)
	s := newFleetSite(t)
	v1, v2 := s.capsule(t, "1.0.0"), s.capsule(t, "2.0.0")
	a := s.start(t, "gw-a", v1, "work_root "+filepath.Join(s.dir, "work-a")+"\n\t\tgrace_period 2s", 1)
	b := s.start(t, "gw-b", v2, "work_root "+filepath.Join(s.dir, "work-b"), 4)
	const path = "/agents/fleet/"
	send := func(g *gateway, text, contextID string, blocking bool) task03 {
		t.Helper()
		return decodeTask(t, g.call(t, path, "", "message/send", map[string]any{"message": msg03(text, "", contextID),
			"configuration": map[string]any{"blocking": blocking}}))
	}
	hold := func(tag string) task03 {
		t.Helper()
		tk := send(a, "barrier "+s.rec.srv.URL+"/hold/"+tag, "", false)
		if got := <-s.rec.got; got != tag {
			t.Fatalf("the recorder got %s, want %s", got, tag)
		}
		return tk
	}
	run := func(tag string) string { return "barrier " + s.rec.srv.URL + "/run/" + tag }

	// A context whose task gw-a ran left a file in gw-a's work_root.
	if kept := send(a, "keep hello", "ctx-files", true); kept.Status.State != "completed" {
		t.Fatalf("keep on gw-a: %v", kept)
	}
	// gw-a's one slot is taken; three tasks of version 1.0.0 queue in a context.
	hold("busy")
	var queued []task03
	for i := range 3 {
		queued = append(queued, send(a, run(fmt.Sprint("v1-", i)), "ctx-v1", false))
	}
	// gw-b takes a task of its own version from the same queue: it claimed past the
	// older ones of 1.0.0, which stay queued.
	mine := send(b, run("v2-0"), "ctx-v2", true)
	if mine.Status.State != "completed" || !strings.Contains(mine.text(), "version 2.0.0") {
		t.Fatalf("gw-b's own task: %v", mine)
	}
	for _, q := range queued {
		if got := decodeTask(t, b.call(t, path, "", "tasks/get", map[string]any{"id": q.ID})); got.Status.State != "submitted" {
			t.Fatalf("a task of 1.0.0 through gw-b while gw-a lives: %v", got)
		}
	}
	// gw-a runs them, in order, once its slot is free.
	s.rec.release("busy")
	for i, q := range queued {
		_, final := streamEnd(b.stream(t, path, "", "tasks/resubscribe", map[string]any{"id": q.ID}))
		got := decodeTask(t, b.call(t, path, "", "tasks/get", map[string]any{"id": q.ID}))
		if final != "completed" || !strings.Contains(got.text(), fmt.Sprintf("ran v1-%d (version 1.0.0)", i)) {
			t.Errorf("task %d of 1.0.0: %v", i, got)
		}
	}

	// gw-a busy again, more tasks of 1.0.0 queued behind, and gw-a stops: its held task
	// ends interrupted at the end of its grace period; no live replica serves 1.0.0 now,
	// and gw-b runs the queued ones.
	busy := hold("busy-again")
	later := []task03{send(a, run("v1-later-0"), "ctx-v1-later", false), send(a, run("v1-later-1"), "ctx-v1-later", false)}
	a.cmd.Process.Signal(os.Interrupt)
	a.cmd.Wait()
	if got := decodeTask(t, b.call(t, path, "", "tasks/get", map[string]any{"id": busy.ID})); got.Status.State != "failed" || !strings.Contains(got.String(), "interrupted: gateway gw-a stopped while this task ran") {
		t.Errorf("gw-a's task at the end of its grace period: %v", got)
	}
	for i, q := range later {
		_, final := streamEnd(b.stream(t, path, "", "tasks/resubscribe", map[string]any{"id": q.ID}))
		got := decodeTask(t, b.call(t, path, "", "tasks/get", map[string]any{"id": q.ID}))
		if final != "completed" || !strings.Contains(got.text(), fmt.Sprintf("ran v1-later-%d (version 2.0.0)", i)) {
			t.Errorf("queued task %d of 1.0.0 after gw-a stopped: %v", i, got)
		}
	}
	// The context whose file is in gw-a's work_root, continued on gw-b: refused with the
	// cause, not run without its file.
	moved := send(b, "recall", "ctx-files", true)
	if moved.Status.State != "failed" || !strings.Contains(moved.String(), "E-RUN-014") || !strings.Contains(moved.String(), "gw-a") {
		t.Errorf("a task of a context whose files gw-a wrote, run by gw-b: %v", moved)
	}
}
