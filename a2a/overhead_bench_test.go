package a2a

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskdb"
)

// instantExec completes every task at once with "ok": what is left of a SendMessage's
// latency is the gateway's own.
type instantExec struct{}

func (instantExec) Execute(context.Context, *Job) Outcome {
	return Outcome{State: "completed", Text: "ok"}
}

// overheadRoute is one of the routes BenchmarkSendOverhead compares.
type overheadRoute struct {
	name, url string
	agent     bool // sends a 1.0 SendMessage (else a small JSON body to the plain route)
}

// BenchmarkSendOverhead compares, in one run, a plain handler answering a small JSON body
// (a), the A2A handler answering a blocking 1.0 SendMessage with a memory store (b) and
// with the durable store (c), all over httptest on 127.0.0.1 with a keep-alive client.
// Every iteration sends one request to each route in turn, so that the machine's other
// work weighs on the three alike. It reports p50 and p99 per request of each route and
// the overhead b−a and c−a at p50 (µs). "serial" is one client; "parallel" is 8 clients
// per core, so that the durable store's group commits fill (a lone client waits out the
// store's 2 ms commit window on every task). docs/benchmarks.md quotes it.
func BenchmarkSendOverhead(b *testing.B) {
	routes := overheadRoutes(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	b.Cleanup(hc.CloseIdleConnections)
	var seq atomic.Int64
	b.Run("serial", func(b *testing.B) {
		lat := make([][]time.Duration, len(routes))
		for b.Loop() {
			for i, rt := range routes {
				lat[i] = append(lat[i], sendOnce(b, hc, rt, seq.Add(1)))
			}
		}
		reportOverhead(b, routes, lat)
	})
	b.Run("parallel", func(b *testing.B) {
		lat := make([][]time.Duration, len(routes))
		var mu sync.Mutex
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			own := make([][]time.Duration, len(routes))
			for pb.Next() {
				for i, rt := range routes {
					own[i] = append(own[i], sendOnce(b, hc, rt, seq.Add(1)))
				}
			}
			mu.Lock()
			for i := range own {
				lat[i] = append(lat[i], own[i]...)
			}
			mu.Unlock()
		})
		reportOverhead(b, routes, lat)
	})
}

// overheadRoutes starts the three servers of BenchmarkSendOverhead.
func overheadRoutes(b *testing.B) []overheadRoute {
	plainBody := []byte(`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` + "\n")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(plainBody)
	}))
	b.Cleanup(plain.Close)
	db, err := taskdb.Open(filepath.Join(b.TempDir(), "tasks.db"), taskdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	agent := func(store *taskdb.DB) string {
		h, err := NewHandler(Config{Card: testCard(), Executor: instantExec{}, Store: store})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(h)
		b.Cleanup(func() {
			stopNow(h)
			srv.Close()
		})
		return srv.URL + "/"
	}
	mem := agent(nil)
	durable := agent(db)
	b.Cleanup(func() { _ = db.Close() }) // after the handler's Shutdown (cleanups run last first)
	return []overheadRoute{{"plain", plain.URL + "/", false}, {"mem", mem, true}, {"durable", durable, true}}
}

// sendOnce sends one request to rt and returns how long the answer took, whole body read.
func sendOnce(b *testing.B, hc *http.Client, rt overheadRoute, n int64) time.Duration {
	var body []byte
	if rt.agent {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`, n, n)
	} else {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":%d}}`, n, n)
	}
	req, err := http.NewRequest(http.MethodPost, rt.url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: HTTP %d, %v: %s", rt.name, resp.StatusCode, err, data)
	}
	if rt.agent && !bytes.Contains(data, []byte(`"TASK_STATE_COMPLETED"`)) {
		b.Fatalf("%s: the task did not complete: %s", rt.name, data)
	}
	return d
}

// reportOverhead reports each route's p50 and p99 and the agents' overhead over the
// first (plain) route at p50, in µs.
func reportOverhead(b *testing.B, routes []overheadRoute, lat [][]time.Duration) {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	p50 := make([]time.Duration, len(routes))
	for i, rt := range routes {
		if len(lat[i]) == 0 {
			return
		}
		slices.Sort(lat[i])
		p50[i] = pctOf(lat[i], 0.50)
		b.ReportMetric(us(p50[i]), rt.name+"-p50-µs")
		b.ReportMetric(us(pctOf(lat[i], 0.99)), rt.name+"-p99-µs")
	}
	for i := 1; i < len(routes); i++ {
		b.ReportMetric(us(p50[i]-p50[0]), routes[i].name+"-overhead-p50-µs")
	}
	b.ReportMetric(0, "ns/op") // the sum of three routes' requests means nothing alone
}

// pctOf returns the p-th quantile of sorted.
func pctOf(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
