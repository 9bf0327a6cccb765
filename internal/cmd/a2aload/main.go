// Command a2aload drives an A2A agent with many concurrent clients, each sending
// message/send tasks one after the other, and reports completed tasks per second and
// latency percentiles: the load figures of docs/benchmarks.md. It talks only to the URL
// it is given.
//
//	go run ./internal/cmd/a2aload -url http://127.0.0.1:8080/agents/wordcount/ -clients 200 -duration 20s
//
// With -verify it then lists the agent's tasks (1.0 ListTasks, every page) and checks
// that every task answered completed is there exactly once, completed, and that the run
// left no other task: none lost, none duplicated.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	var cfg loadConfig
	flag.StringVar(&cfg.url, "url", "", "the agent's JSON-RPC endpoint (the card's url)")
	flag.IntVar(&cfg.clients, "clients", 200, "concurrent clients")
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long to send")
	flag.IntVar(&cfg.tasks, "tasks", 0, "stop after sending this many tasks in all (0: no limit, -duration alone)")
	flag.StringVar(&cfg.text, "text", "one two three four five", "the task text")
	flag.BoolVar(&cfg.sameContext, "same-context", false, "every client sends in one context of its own (else a new context per task)")
	flag.BoolVar(&cfg.plain, "plain", false, "count any 2xx answer as done, for a baseline route that is not an agent (a Caddy respond)")
	verify := flag.Bool("verify", false, "after the load, list the agent's tasks and check none was lost or duplicated (needs the agent's whole task list: a task store, or fewer than 1,000 tasks)")
	flag.Parse()
	if cfg.url == "" || (*verify && cfg.plain) {
		fmt.Fprintln(os.Stderr, "usage: a2aload -url <agent endpoint> [-clients n] [-duration d] [-tasks n] [-verify | -plain]")
		os.Exit(2)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.clients, MaxConnsPerHost: cfg.clients}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	res := load(hc, cfg)
	latencies := res.latencies
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	fmt.Printf("clients %d, %s: %d completed, %d failed, %.0f tasks/s, p50 %s, p99 %s\n", cfg.clients, res.elapsed.Round(time.Millisecond),
		len(latencies), res.failed, float64(len(latencies))/res.elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond))
	if !*verify {
		return
	}
	listed, err := listTasks(hc, cfg.url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "a2aload: listing the tasks:", err)
		os.Exit(1)
	}
	v := verifyTasks(res.answered, res.failed, listed, res.prefix)
	fmt.Println(v)
	if !v.ok() {
		os.Exit(1)
	}
}

// loadConfig is what a load does (the flags).
type loadConfig struct {
	url            string
	clients, tasks int
	duration       time.Duration
	text           string
	sameContext    bool
	plain          bool
}

// loadResult is what a load measured.
type loadResult struct {
	elapsed   time.Duration
	latencies []time.Duration // of the tasks completed within the run
	failed    int64           // sends that did not complete, within the run or after it
	// answered holds every task the agent answered, cut off by the end of the run or
	// not, failed or not: the tasks the run made that the client knows of.
	answered []answer
	// prefix starts every messageId of this run (and of no other).
	prefix string
}

// answer is one task as its message/send answer gave it.
type answer struct{ taskID, messageID, state string }

// load runs cfg's clients until cfg.duration passes or cfg.tasks were sent.
func load(hc *http.Client, cfg loadConfig) loadResult {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	run := make([]byte, 6)
	_, _ = rand.Read(run)
	res := loadResult{prefix: "m-" + hex.EncodeToString(run) + "-"}
	var (
		mu     sync.Mutex
		failed atomic.Int64
		sent   atomic.Int64
		wg     sync.WaitGroup
	)
	start := time.Now()
	for c := range cfg.clients {
		wg.Go(func() {
			var own []time.Duration
			var answered []answer
			for n := 0; ctx.Err() == nil && (cfg.tasks == 0 || sent.Add(1) <= int64(cfg.tasks)); n++ {
				msgID := fmt.Sprintf("%s%d-%d", res.prefix, c, n)
				msg := map[string]any{"kind": "message", "messageId": msgID, "role": "user",
					"parts": []any{map[string]any{"kind": "text", "text": cfg.text}}}
				if cfg.sameContext {
					msg["contextId"] = fmt.Sprintf("ctx_load_%d", c)
				}
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": "message/send", "params": map[string]any{"message": msg}})
				t0 := time.Now()
				a, ok := send(hc, cfg.url, body, cfg.plain)
				if a.taskID != "" {
					a.messageID = msgID
					answered = append(answered, a)
				}
				if !ok {
					failed.Add(1)
					continue
				}
				if ctx.Err() != nil {
					break // cut off by the end of the run: not timed
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, own...)
			res.answered = append(res.answered, answered...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.failed = failed.Load()
	return res
}

// send posts one message/send and reports the task answered and whether it completed
// (plain: whether the answer was 2xx).
func send(hc *http.Client, url string, body []byte, plain bool) (answer, bool) {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{}, false
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if plain {
		return answer{}, resp.StatusCode/100 == 2
	}
	var r struct {
		Result struct {
			ID     string
			Status struct{ State string }
		}
	}
	if json.Unmarshal(data, &r) != nil {
		return answer{}, false
	}
	a := answer{taskID: r.Result.ID, state: r.Result.Status.State}
	return a, a.state == "completed"
}

// listed is one task of a ListTasks page: its id, state and the messageId of the first
// message of its history (the one that made it).
type listed struct{ taskID, state, messageID string }

// listTasks pages through the agent's ListTasks (1.0, as the anonymous principal) and
// returns every entry in the order listed.
func listTasks(hc *http.Client, url string) ([]listed, error) {
	var out []listed
	token := ""
	for page := 1; ; page++ {
		params := map[string]any{"pageSize": 100}
		if token != "" {
			params["pageToken"] = token
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": page, "method": "ListTasks", "params": params})
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var r struct {
			Result *struct {
				Tasks []struct {
					ID      string
					Status  struct{ State string }
					History []struct{ MessageID string }
				}
				NextPageToken string
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("page %d: HTTP %d: %v", page, resp.StatusCode, err)
		}
		if r.Result == nil {
			msg := "no result"
			if r.Error != nil {
				msg = r.Error.Message
			}
			return nil, fmt.Errorf("page %d: %s", page, msg)
		}
		for _, t := range r.Result.Tasks {
			l := listed{taskID: t.ID, state: t.Status.State}
			if len(t.History) > 0 {
				l.messageID = t.History[0].MessageID
			}
			out = append(out, l)
		}
		if r.Result.NextPageToken == "" {
			return out, nil
		}
		if r.Result.NextPageToken == token {
			return nil, fmt.Errorf("page %d: the same page token again", page)
		}
		token = r.Result.NextPageToken
	}
}

// verdict is what verifyTasks found.
type verdict struct {
	answered int // tasks answered completed
	failed   int64
	listed   int // tasks of this run listed, repeats included
	// The problems, each a few examples and a count.
	lost, repeated, notCompleted, unanswered, answeredOther, mismatched problem
}

// problem is one kind of wrong: how many, and the first few task ids.
type problem struct {
	n    int
	some []string
}

func (p *problem) add(what string) {
	p.n++
	if len(p.some) < 5 {
		p.some = append(p.some, what)
	}
}

func (v verdict) ok() bool {
	return v.failed == 0 && v.listed == v.answered && v.lost.n+v.repeated.n+v.notCompleted.n+v.unanswered.n+v.answeredOther.n+v.mismatched.n == 0
}

func (v verdict) String() string {
	var b strings.Builder
	word := "FAILED"
	if v.ok() {
		word = "ok"
	}
	fmt.Fprintf(&b, "verify %s: %d tasks answered completed, %d listed from this run, %d sends failed", word, v.answered, v.listed, v.failed)
	for _, p := range []struct {
		name string
		p    problem
	}{
		{"answered completed but not listed (lost)", v.lost},
		{"listed more than once", v.repeated},
		{"listed but not completed", v.notCompleted},
		{"listed but never answered completed (an extra task)", v.unanswered},
		{"answered but not completed", v.answeredOther},
		{"listed with another messageId than the one sent", v.mismatched},
	} {
		if p.p.n > 0 {
			fmt.Fprintf(&b, "\n  %d %s: %s", p.p.n, p.name, strings.Join(p.p.some, ", "))
		}
	}
	return b.String()
}

// verifyTasks checks the tasks a run was answered against the agent's list: the entries
// whose first message carries the run's messageId prefix are the run's. Every task
// answered completed must be listed exactly once, completed, under the messageId it was
// sent with; no other task of the run may be listed; and no send may have failed, for a
// failed send may have made a task the client cannot account for.
func verifyTasks(answered []answer, failed int64, list []listed, prefix string) verdict {
	v := verdict{failed: failed}
	sent := map[string]string{} // task id → messageId, of the tasks answered completed
	for _, a := range answered {
		if a.state != "completed" {
			v.answeredOther.add(a.taskID + " (" + a.state + ")")
			continue
		}
		if _, dup := sent[a.taskID]; dup {
			v.repeated.add(a.taskID + " (answered twice)")
			continue
		}
		sent[a.taskID] = a.messageID
		v.answered++
	}
	seen := map[string]int{}
	for _, l := range list {
		seen[l.taskID]++
		msgID, mine := sent[l.taskID]
		if !mine && !strings.HasPrefix(l.messageID, prefix) {
			continue // another run's task, or another client's
		}
		v.listed++
		switch {
		case seen[l.taskID] > 1:
			v.repeated.add(l.taskID)
			continue
		case !mine:
			v.unanswered.add(l.taskID + " (" + l.messageID + ")")
			continue
		case l.messageID != msgID:
			v.mismatched.add(l.taskID)
		}
		if l.state != "TASK_STATE_COMPLETED" {
			v.notCompleted.add(l.taskID + " (" + l.state + ")")
		}
	}
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the same examples every time
	for _, id := range ids {
		if seen[id] == 0 {
			v.lost.add(id)
		}
	}
	return v
}
