package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGateway drives the built binary serving Caddyfile.example (plus test capsules for
// the lifecycle cases) over HTTP exactly as an A2A client would.
func TestGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	g := startGateway(t)

	// Before any task runs: every staged artifact already has its series at zero.
	t.Run("metrics from zero", func(t *testing.T) {
		metrics := scrape(t, g)
		for _, a := range []struct{ capsule, artifact, role string }{
			{"hello", "anthropic-messages", "driver"}, {"hello", "wordcount", "tool"},
			{"wordcount", "wordcount", "capsule"}, {"gate-queue", "gatetool", "tool"}, {"gate-queue", "gate-queue", "capsule"},
		} {
			for _, reason := range []string{"deadline", "memory_limit", "trap", "exit", "abi"} {
				series := fmt.Sprintf(`capsule_guest_traps_total{artifact=%q,capsule=%q,reason=%q,role=%q}`, a.artifact, a.capsule, reason, a.role)
				if v, ok := metrics[series]; !ok || v != 0 {
					t.Errorf("%s: present %v, value %v", series, ok, v)
				}
			}
			series := fmt.Sprintf(`capsule_guest_calls_total{artifact=%q,capsule=%q,role=%q,status="ok"}`, a.artifact, a.capsule, a.role)
			if v, ok := metrics[series]; !ok || v != 0 {
				t.Errorf("%s: present %v, value %v", series, ok, v)
			}
		}
	})

	// The log names docs/operators.md promises ("Sessions and logs").
	t.Run("log names", func(t *testing.T) {
		want := map[string]string{"capsule staged": "capsule.a2a", "cassettes loaded": "http.handlers.capsule_replay"}
		for _, line := range strings.Split(g.logs.String(), "\n") {
			var e struct{ Logger, Msg string }
			if json.Unmarshal([]byte(line), &e) == nil && want[e.Msg] != "" {
				if e.Logger != want[e.Msg] {
					t.Errorf("%q logged by %q, want %q", e.Msg, e.Logger, want[e.Msg])
				}
				delete(want, e.Msg)
			}
		}
		if len(want) > 0 {
			t.Errorf("never logged: %v\n%s", want, g.logs.String())
		}
	})

	t.Run("listens on 127.0.0.1 only", func(t *testing.T) {
		u, _ := url.Parse(g.base)
		for _, port := range []string{u.Port(), g.replay} {
			addrs := listeners(t, port)
			if len(addrs) == 0 {
				t.Fatalf("nothing listens on port %s", port)
			}
			for _, a := range addrs {
				if a != "127.0.0.1" {
					t.Errorf("port %s listens on %s", port, a)
				}
			}
		}
	})

	t.Run("deployment layouts with the official clients", func(t *testing.T) {
		layouts := maps.Clone(g.layouts)
		layouts["behind a front Caddy"] = startFront(t, g)
		for _, name := range slices.Sorted(maps.Keys(layouts)) {
			agent, urlAgent := layouts[name]+"/agents/wc/", layouts[name]+"/agents/url/"
			t.Run(name, func(t *testing.T) {
				// A client's own forwarded headers change nothing: the route's server does
				// not trust it, and the front proxy replaces or sets them.
				for _, h := range []map[string]string{nil, {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https", "X-Forwarded-Prefix": "/evil"}} {
					if got := cardURL(t, g, agent+".well-known/agent-card.json", h); got != agent {
						t.Errorf("headers %v: card url %s, want %s", h, got, agent)
					}
				}
				// The guest's MURMUR_CAPSULE_URL is the same URL (the gate guest names it).
				tk := decodeTask(t, g.call(t, urlAgent, "", "message/send", map[string]any{"message": msg03("hi")},
					"X-Forwarded-Host", "evil.example", "X-Forwarded-Prefix", "/evil"))
				if !strings.Contains(tk.text(), "at "+urlAgent) {
					t.Errorf("MURMUR_CAPSULE_URL: the guest answered %q, want it to name %s", tk.text(), urlAgent)
				}
				officialClients(t, g.httpClient, agent)
			})
		}
	})

	t.Run("agent card at both paths names the public URL", func(t *testing.T) {
		var etag string
		// A 0.3 client asks for the 0.3 fields; the 1.0 card (the default) names the URL in
		// supportedInterfaces alone, checked below.
		for _, p := range []string{"/agents/hello/.well-known/agent-card.json?A2A-Version=0.3", "/agents/hello/.well-known/agent.json?A2A-Version=0.3"} {
			resp, err := g.httpClient.Get(g.base + p)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var card struct {
				Name, Version, URL, ProtocolVersion, PreferredTransport string
				SupportedInterfaces                                     []struct{ URL, ProtocolBinding, ProtocolVersion string }
				Capabilities                                            struct{ Streaming bool }
				Skills                                                  []struct{ ID string }
			}
			if err := json.Unmarshal(data, &card); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %v %s", p, resp.StatusCode, err, data)
			}
			if card.Name != "hello" || card.URL != g.base+"/agents/hello/" || card.ProtocolVersion != "0.3.0" ||
				card.PreferredTransport != "JSONRPC" || !card.Capabilities.Streaming || len(card.SupportedInterfaces) < 2 {
				t.Errorf("%s: card = %s", p, data)
			}
			for _, si := range card.SupportedInterfaces {
				want := g.base + "/agents/hello/"
				if si.ProtocolBinding == "HTTP+JSON" && si.ProtocolVersion == "1.0" {
					want = g.base + "/agents/hello" // 1.0 REST clients append "/message:send"
				}
				if si.URL != want || si.ProtocolBinding != "JSONRPC" && si.ProtocolBinding != "HTTP+JSON" {
					t.Errorf("interface %+v", si)
				}
			}
			if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") == "" {
				t.Errorf("%s: headers %v", p, resp.Header)
			}
			etag = resp.Header.Get("ETag")
		}
		req, _ := http.NewRequest("GET", g.base+"/agents/hello/.well-known/agent-card.json?A2A-Version=0.3", nil)
		req.Header.Set("If-None-Match", etag)
		resp, err := g.httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("If-None-Match: %d", resp.StatusCode)
		}
	})

	t.Run("0.3 message/send completes the agent task", func(t *testing.T) {
		tk := decodeTask(t, g.call(t, "/agents/hello/", "", "message/send",
			map[string]any{"message": msg03("Say hello, then count the words in: the quick brown fox")}))
		if tk.Status.State != "completed" || !strings.Contains(tk.text(), "has 4 words") {
			t.Fatalf("task = %+v", tk)
		}
		got := decodeTask(t, g.call(t, "/agents/hello/", "", "tasks/get", map[string]any{"id": tk.ID}))
		if got.ID != tk.ID || got.Status.State != "completed" || !strings.Contains(got.text(), "has 4 words") {
			t.Errorf("tasks/get = %+v", got)
		}
	})

	t.Run("1.0 SendMessage", func(t *testing.T) {
		r := g.call(t, "/agents/wordcount/", "1.0", "SendMessage", map[string]any{"message": msg10("one two three")})
		var res struct{ Task task03 }
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			t.Fatalf("reply %+v %s", r.Error, r.Result)
		}
		if res.Task.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(res.Task.text(), "3 words") {
			t.Fatalf("result = %s", r.Result)
		}
		r = g.call(t, "/agents/wordcount/", "1.0", "GetTask", map[string]any{"id": res.Task.ID})
		if r.Error != nil || !strings.Contains(string(r.Result), "TASK_STATE_COMPLETED") {
			t.Errorf("GetTask: %+v %s", r.Error, r.Result)
		}
	})

	t.Run("HTTP+JSON through Caddy: 1.0 send and get, 0.3 get", func(t *testing.T) {
		body, _ := json.Marshal(map[string]any{"message": msg10("one two three")})
		req, _ := http.NewRequest("POST", g.base+"/agents/wordcount/message:send", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := g.httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct{ Task task03 }
		if resp.StatusCode != 200 || json.Unmarshal(data, &res) != nil || res.Task.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(res.Task.text(), "3 words") {
			t.Fatalf("POST message:send: HTTP %d: %s", resp.StatusCode, data)
		}
		resp, err = g.httpClient.Get(g.base + "/agents/wordcount/v1/tasks/" + res.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		data, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(data), `"state":"TASK_STATE_COMPLETED"`) {
			t.Errorf("GET v1/tasks/{id}: HTTP %d: %s", resp.StatusCode, data)
		}
	})

	t.Run("message/stream: working, chunks, artifact, completed", func(t *testing.T) {
		var kinds []string
		last := 0
		final := ""
		var ans answerStream
		for ev := range g.stream(t, "/agents/wordcount/", "", "message/stream", map[string]any{"message": msg03("one two three four")}) {
			if ev.id <= last {
				t.Errorf("event id %d after %d", ev.id, last)
			}
			last = ev.id
			var r struct {
				Result struct {
					Kind   string
					Final  bool
					Status struct {
						State string
					}
					Artifact          struct{ Parts []struct{ Text string } }
					Append, LastChunk bool
				}
			}
			json.Unmarshal(ev.data, &r)
			kinds = append(kinds, r.Result.Kind+":"+r.Result.Status.State)
			if r.Result.Kind == "artifact-update" {
				text := ""
				for _, p := range r.Result.Artifact.Parts {
					text += p.Text
				}
				ans.add(text, r.Result.Append, r.Result.LastChunk)
			}
			if r.Result.Final {
				final = r.Result.Status.State
			}
		}
		// The tool's progress line streams as the answer's first chunk; the answer, which
		// it does not begin, replaces it.
		if !strings.Contains(ans.streamed(), "Counting the words") || !strings.Contains(ans.answer, "4 words") || strings.Contains(ans.answer, "Counting") || final != "completed" {
			t.Fatalf("events %v; chunks %q; answer %q; final %q", kinds, ans.chunks, ans.answer, final)
		}
		if !strings.Contains(strings.Join(kinds, " "), "working") {
			t.Errorf("no working state in %v", kinds)
		}
	})

	t.Run("official clients", func(t *testing.T) { officialClients(t, g.httpClient, g.base+"/agents/wordcount/") })

	t.Run("input-required round trip", func(t *testing.T) {
		tk := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("")}))
		if tk.Status.State != "input-required" || !strings.Contains(string(tk.Status.Message), "Which text") {
			t.Fatalf("task = %+v", tk)
		}
		done := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send",
			map[string]any{"message": msg03("a b c d e", tk.ID, tk.ContextID)}))
		if done.ID != tk.ID || done.Status.State != "completed" || !strings.Contains(done.text(), "5 words") {
			t.Fatalf("answered task = %+v", done)
		}
	})

	t.Run("tasks/cancel stops the running guest", func(t *testing.T) {
		id := startSpinning(t, g, "/agents/gate-queue/", "")
		tk := decodeTask(t, g.call(t, "/agents/gate-queue/", "", "tasks/cancel", map[string]any{"id": id}))
		if tk.Status.State != "canceled" {
			t.Fatalf("cancel = %+v", tk)
		}
		// The canceled call is counted only once the guest has returned: it stopped.
		waitMetric(t, g, `capsule_guest_calls_total{artifact="gatetool",capsule="gate-queue",role="tool",status="canceled"}`, 1)
		r := g.call(t, "/agents/gate-queue/", "", "tasks/cancel", map[string]any{"id": id})
		if r.Error == nil || r.Error.Code != -32002 {
			t.Errorf("cancel of a canceled task: %+v", r.Error)
		}
	})

	t.Run("queue_depth 2: five concurrent sends in one context", func(t *testing.T) {
		var wg sync.WaitGroup
		tasks := make([]task03, 5)
		for i := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tasks[i] = decodeTask(t, g.call(t, "/agents/gate-queue/", "", "message/send",
					map[string]any{"message": msg03("spin", "", "ctx_queue"), "configuration": map[string]any{"blocking": false}}))
			}()
		}
		wg.Wait()
		count := map[string]int{}
		for _, tk := range tasks {
			count[tk.Status.State]++
		}
		if count["rejected"] != 2 || count["submitted"]+count["working"] != 3 || count["submitted"] < 2 {
			t.Fatalf("states = %v", count)
		}
		for _, tk := range tasks {
			if tk.Status.State != "rejected" {
				g.call(t, "/agents/gate-queue/", "", "tasks/cancel", map[string]any{"id": tk.ID})
			}
		}
	})

	t.Run("single: a second send in the context is rejected, another context served", func(t *testing.T) {
		id := startSpinning(t, g, "/agents/gate-single/", "ctx_single")
		second := decodeTask(t, g.call(t, "/agents/gate-single/", "", "message/send", map[string]any{"message": msg03("hi", "", "ctx_single")}))
		if second.Status.State != "rejected" {
			t.Fatalf("second = %+v", second)
		}
		// Another context runs beside the spinning one.
		if other := decodeTask(t, g.call(t, "/agents/gate-single/", "", "message/send", map[string]any{"message": msg03("hi", "", "ctx_other")})); other.Status.State != "completed" {
			t.Fatalf("another context = %+v", other)
		}
		decodeTask(t, g.call(t, "/agents/gate-single/", "", "tasks/cancel", map[string]any{"id": id}))
		// The context frees once the canceled guest has returned; the next send may still
		// meet it busy, so it is retried until served (bounded).
		for i := 0; ; i++ {
			later := decodeTask(t, g.call(t, "/agents/gate-single/", "", "message/send", map[string]any{"message": msg03("hi", "", "ctx_single")}))
			if later.Status.State == "completed" {
				break
			}
			if i == 50 || later.Status.State != "rejected" {
				t.Fatalf("later = %+v", later)
			}
		}
	})

	t.Run("resubscribe mid-task: current state, then the rest", func(t *testing.T) {
		var id, ctxID string
		for ev := range g.stream(t, "/agents/gate-queue/", "", "message/stream", map[string]any{"message": msg03("ask")}) {
			var r struct{ Result task03 }
			json.Unmarshal(ev.data, &r)
			if r.Result.ID != "" {
				id, ctxID = r.Result.ID, r.Result.ContextID
			}
			if r.Result.Kind == "" {
				var su struct {
					Result struct{ TaskID, ContextID string }
				}
				json.Unmarshal(ev.data, &su)
				id, ctxID = su.Result.TaskID, su.Result.ContextID
			}
		}
		if id == "" {
			t.Fatal("no task id in the stream")
		}
		sub := g.stream(t, "/agents/gate-queue/", "", "tasks/resubscribe", map[string]any{"id": id})
		first := <-sub
		var cur struct{ Result task03 }
		json.Unmarshal(first.data, &cur)
		if cur.Result.ID != id || cur.Result.Status.State != "input-required" {
			t.Fatalf("first resubscribe event = %s", first.data)
		}
		done := decodeTask(t, g.call(t, "/agents/gate-queue/", "", "message/send", map[string]any{"message": msg03("yes", id, ctxID)}))
		if done.Status.State != "completed" || !strings.Contains(done.text(), "answered yes") {
			t.Fatalf("answered = %+v", done)
		}
		if _, final := streamEnd(sub); final != "completed" {
			t.Errorf("resubscriber's final state %q", final)
		}
	})

	t.Run("bearer auth", func(t *testing.T) {
		params := map[string]any{"message": msg03("hi")}
		for _, tt := range []struct {
			name    string
			headers []string
			want    int
		}{
			{"missing", nil, 401},
			{"wrong", []string{"Authorization", "Bearer nope"}, 401},
			{"right", []string{"Authorization", "Bearer s3cret-token"}, 200},
		} {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params})
			resp := g.post(t, "/agents/gate-auth/", "", body, tt.headers...)
			resp.Body.Close()
			if resp.StatusCode != tt.want || (tt.want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("%s: %d %v", tt.name, resp.StatusCode, resp.Header)
			}
		}
	})

	// Principals: a token per team, and Caddy's basic_auth naming each user; B never sees
	// A's task (docs/operators.md "Principals").
	t.Run("principals: named tokens and basic_auth in front", func(t *testing.T) {
		for _, tc := range []struct {
			name, path string
			a, b       []string // each principal's credentials, as header pairs
		}{
			{"auth bearer per team", "/agents/gate-teams/", []string{"Authorization", "Bearer team-a-token"}, []string{"Authorization", "Bearer team-b-token"}},
			{"basic_auth", "/agents/gate-basic/", []string{"Authorization", basic("alice", "alice-pw")}, []string{"Authorization", basic("bob", "bob-pw")}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tk := decodeTask(t, g.call(t, tc.path, "", "message/send", map[string]any{"message": msg03("echo hi")}, tc.a...))
				if tk.Status.State != "completed" {
					t.Fatalf("A's task: %+v", tk)
				}
				for _, m := range []struct{ version, method string }{{"", "tasks/get"}, {"", "tasks/cancel"}, {"1.0", "GetTask"}, {"1.0", "CancelTask"}} {
					if r := g.call(t, tc.path, m.version, m.method, map[string]any{"id": tk.ID}, tc.b...); r.Error == nil || r.Error.Code != -32001 {
						t.Errorf("B's %s of A's task: %+v", m.method, r)
					}
				}
				for _, who := range []struct {
					creds []string
					want  int
				}{{tc.b, 0}, {tc.a, 1}} {
					r := g.call(t, tc.path, "1.0", "ListTasks", map[string]any{}, who.creds...)
					var list struct{ Tasks []struct{ ID string } }
					if r.Error != nil || json.Unmarshal(r.Result, &list) != nil || len(list.Tasks) != who.want {
						t.Errorf("ListTasks as %v: %+v %s", who.creds, r.Error, r.Result)
					}
				}
				if r := g.call(t, tc.path, "", "tasks/get", map[string]any{"id": tk.ID}, tc.a...); r.Error != nil {
					t.Errorf("A's own tasks/get: %+v", r.Error)
				}
				if r := g.call(t, tc.path, "1.0", "GetExtendedAgentCard", map[string]any{}, tc.a...); r.Error != nil {
					t.Errorf("A's extended card: %+v", r.Error)
				}
				resp := g.post(t, tc.path, "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("no credentials: HTTP %d", resp.StatusCode)
				}
				if tc.path == "/agents/gate-teams/" {
					// The manifest is also served on an open route: there the caller is
					// anonymous and A's task is not found; the team route still asks for
					// a token (checked just above), whichever route was provisioned last.
					if r := g.call(t, "/agents/gate-teams-open/", "", "tasks/get", map[string]any{"id": tk.ID}); r.Error == nil || r.Error.Code != -32001 {
						t.Errorf("the open route reads team-a's task: %+v", r)
					}
				}
			})
		}
	})

	t.Run("protocol errors", func(t *testing.T) {
		resp := g.post(t, "/agents/wordcount/", "", bytes.Repeat([]byte("x"), 2<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("2 MiB body: %d", resp.StatusCode)
		}
		for _, tt := range []struct {
			body    string
			version string
			code    int
		}{
			{`{"jsonrpc": "2.0", "id": 1, "method": `, "", -32700},
			{`{"jsonrpc": "2.0", "id": 1, "method": "tasks/explode", "params": {}}`, "", -32601},
			{`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}`, "", -32601},
			{`{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}`, "9.9", -32009},
			{`{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "tsk_nope"}}`, "", -32001},
		} {
			resp := g.post(t, "/agents/wordcount/", tt.version, []byte(tt.body))
			var r rpcReply
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if r.Error == nil || r.Error.Code != tt.code {
				t.Errorf("%s: error %+v, want %d", tt.body, r.Error, tt.code)
			}
		}
	})

	t.Run("deadline trap counted", func(t *testing.T) {
		tk := decodeTask(t, g.call(t, "/agents/gate-deadline/", "", "message/send", map[string]any{"message": msg03("spin")}))
		if tk.Status.State != "failed" || !strings.Contains(string(tk.Status.Message), "deadline") {
			t.Fatalf("task = %+v %s", tk, tk.Status.Message)
		}
		waitMetric(t, g, `capsule_guest_traps_total{artifact="gatetool",capsule="gate-deadline",reason="deadline",role="tool"}`, 1)
		scrapeWithPrometheus(t, g)
	})

	t.Run("reload: in-flight task finishes on the old version, unchanged capsules stay", func(t *testing.T) {
		var id, ctxID string
		for ev := range g.stream(t, "/agents/gate-reload/", "", "message/stream", map[string]any{"message": msg03("ask")}) {
			var su struct {
				Result struct{ ID, TaskID, ContextID string }
			}
			json.Unmarshal(ev.data, &su)
			id, ctxID = firstOf(su.Result.ID, su.Result.TaskID, id), firstOf(su.Result.ContextID, ctxID)
		}
		// Two tasks of other contexts wait for its one slot (concurrency 1): admitted to this
		// version, not started.
		var queued []string
		for _, text := range []string{"q1", "q2"} {
			tk := decodeTask(t, g.call(t, "/agents/gate-reload/", "", "message/send",
				map[string]any{"message": msg03(text), "configuration": map[string]any{"blocking": false}}))
			if tk.Status.State != "submitted" {
				t.Fatalf("queued task = %v", tk)
			}
			queued = append(queued, tk.ID)
		}
		stagedBefore := metricValue(t, g, `capsule_stage_duration_seconds_count{capsule="wordcount"}`)
		mpath := filepath.Join(g.dir, "gate", "reload", "murmur.yaml")
		m, _ := os.ReadFile(mpath)
		os.WriteFile(mpath, bytes.Replace(m, []byte("version: 1.0.0"), []byte("version: 1.0.1"), 1), 0o644)
		// --force: the Caddyfile itself is unchanged, only the capsule's files are.
		g.reload(t, "--force")
		done := decodeTask(t, g.call(t, "/agents/gate-reload/", "", "message/send", map[string]any{"message": msg03("old", id, ctxID)}))
		if done.Status.State != "completed" || !strings.Contains(done.text(), "answered old (version 1.0.0)") {
			t.Fatalf("in-flight task = %+v", done)
		}
		// The queued tasks had not started when their version was replaced: they run on the new one.
		for i, id := range queued {
			final := ""
			for ev := range g.stream(t, "/agents/gate-reload/", "", "tasks/resubscribe", map[string]any{"id": id}) {
				var r struct{ Result task03 }
				json.Unmarshal(ev.data, &r)
				if r.Result.Kind == "task" && (r.Result.Status.State == "completed" || r.Result.Status.State == "failed") {
					final = r.Result.String()
				}
				var su struct {
					Result struct {
						Final  bool
						Status struct{ State string }
					}
				}
				json.Unmarshal(ev.data, &su)
				if su.Result.Final {
					final = su.Result.Status.State
				}
			}
			got := decodeTask(t, g.call(t, "/agents/gate-reload/", "", "tasks/get", map[string]any{"id": id}))
			if got.Status.State != "completed" || !strings.Contains(got.text(), fmt.Sprintf("q%d (version 1.0.1)", i+1)) {
				t.Fatalf("queued task %d = %v (stream ended %s)", i+1, got, final)
			}
		}
		fresh := decodeTask(t, g.call(t, "/agents/gate-reload/", "", "message/send", map[string]any{"message": msg03("new")}))
		if fresh.Status.State != "completed" || !strings.Contains(fresh.text(), "new (version 1.0.1) at "+g.base+"/agents/gate-reload/") {
			t.Fatalf("new task = %+v", fresh)
		}
		if after := metricValue(t, g, `capsule_stage_duration_seconds_count{capsule="wordcount"}`); after != stagedBefore || after != 1 {
			t.Errorf("wordcount staged %v times before the reload, %v after", stagedBefore, after)
		}
		if n := metricValue(t, g, `capsule_stage_duration_seconds_count{capsule="gate-reload"}`); n != 2 {
			t.Errorf("gate-reload staged %v times", n)
		}
	})

	// Last: it kills the gateway and starts it again on the same folders.
	t.Run("kill -9: finished tasks survive, a waiting one is interrupted, a queued one runs", func(t *testing.T) {
		doneID := killScenario(t, g, g.hooks, "/agents/wordcount/", "/agents/gate-reload/", "interrupted: the gateway stopped while this task ran", func() {})
		// The official JS SDK resubscribes after the restart and gets the final state.
		node, dir := jsSDK(t, "../a2a/testdata/jsclient")
		js := exec.Command(node, "resubscribe.mjs", g.base+"/agents/wordcount/.well-known/agent-card.json?A2A-Version=0.3", doneID)
		js.Dir = dir
		out, err := js.Output()
		if err != nil {
			t.Fatalf("node resubscribe.mjs: %v\n%s", err, out)
		}
		var events []struct {
			Kind   string
			Status struct{ State string }
		}
		if err := json.Unmarshal(out, &events); err != nil || len(events) != 1 || events[0].Kind != "task" || events[0].Status.State != "completed" {
			t.Errorf("the JS SDK's resubscribe after the restart: %v %s", err, out)
		}
	})
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// startSpinning starts a "spin" task on the capsule at path and returns its id once the
// guest runs (its "spinning" chunk arrived).
func startSpinning(t *testing.T, g *gateway, path, contextID string) string {
	t.Helper()
	id := ""
	for ev := range g.stream(t, path, "", "message/stream", map[string]any{"message": msg03("spin", "", contextID)}) {
		var r struct {
			Result struct {
				ID, TaskID string
				Artifact   *struct{ Parts []struct{ Text string } }
			}
		}
		json.Unmarshal(ev.data, &r)
		id = firstOf(r.Result.ID, r.Result.TaskID, id)
		if a := r.Result.Artifact; a != nil && len(a.Parts) > 0 && strings.Contains(a.Parts[0].Text, "spinning") {
			return id // the stream's connection closes with the test; the task goes on
		}
	}
	t.Fatalf("the spin task on %s never ran", path)
	return ""
}

var metricLine = regexp.MustCompile(`^(\S+) (\S+)$`)

// scrape reads /metrics once into series → value.
func scrape(t *testing.T, g *gateway) map[string]float64 {
	t.Helper()
	resp, err := g.httpClient.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d: %.2000s", resp.StatusCode, data)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil {
			out[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	return out
}

// cardURL reads the card at u with extra headers and returns the URL it names for
// JSON-RPC 1.0 (its first supportedInterfaces entry).
func cardURL(t *testing.T, g *gateway, u string, headers map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := g.httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card struct {
		SupportedInterfaces []struct{ URL string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil || resp.StatusCode != 200 || len(card.SupportedInterfaces) == 0 {
		t.Fatalf("%s: HTTP %d %v", u, resp.StatusCode, err)
	}
	return card.SupportedInterfaces[0].URL // the JSON-RPC 1.0 endpoint
}

// listeners returns the local addresses of the TCP sockets listening on port, read from
// /proc/net/tcp and tcp6 (what ss -ltn shows).
func listeners(t *testing.T, port string) []string {
	t.Helper()
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	var addrs []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) { // 0A: LISTEN
				continue
			}
			addrs = append(addrs, procAddr(strings.TrimSuffix(fields[1], want)))
		}
	}
	return addrs
}

// procAddr turns /proc/net/tcp's hex address (little-endian 32-bit words) into an IP.
func procAddr(h string) string {
	b, err := hex.DecodeString(h)
	if err != nil {
		return h
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b).String()
}

// metricValue scrapes /metrics once and returns the value of the series (0 if absent).
func metricValue(t *testing.T, g *gateway, series string) float64 {
	t.Helper()
	return scrape(t, g)[series]
}

// waitMetric scrapes until the series reaches want: counters are bumped by the request
// goroutine just after it answered, so the first scrape may race with it.
func waitMetric(t *testing.T, g *gateway, series string, want float64) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%s reaching %v", series, want), func() bool { return metricValue(t, g, series) >= want })
}

// scrapeWithPrometheus runs a real Prometheus server scraping the gateway and asks its
// query API for the deadline traps.
func scrapeWithPrometheus(t *testing.T, g *gateway) {
	t.Helper()
	query := startPrometheus(t, strings.TrimPrefix(g.base, "http://"))
	expr := `capsule_guest_traps_total{capsule="gate-deadline",reason="deadline"} >= 1`
	// Prometheus scrapes on its own clock: ask until the sample is there (bounded).
	eventually(t, 90*time.Second, "Prometheus reporting "+expr, func() bool {
		series, err := promQuery(query, expr)
		if errors.Is(err, errPromQuery) {
			t.Fatal(err)
		}
		return len(series) > 0
	})
}

// startPrometheus runs a real Prometheus server on loopback scraping /metrics of each
// target (host:port) every second, and returns the URL of its instant query API
// (/api/v1/query). The test's cleanup stops it and, when the test failed, logs its output.
func startPrometheus(t *testing.T, targets ...string) (queryURL string) {
	t.Helper()
	bin := needTool(t, "prometheus")
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: capsulegate\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['%s']\n",
		strings.Join(targets, "', '"))
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+port)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	})
	return "http://127.0.0.1:" + port + "/api/v1/query"
}

// basic is an Authorization header value for HTTP basic auth.
func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}
