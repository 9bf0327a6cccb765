// Command a2aload drives an A2A agent with many concurrent clients, each sending
// message/send tasks one after the other, and reports completed tasks per second and
// latency percentiles: the load figures of docs/benchmarks.md. It talks only to the URL
// it is given.
//
//	go run ./internal/cmd/a2aload -url http://127.0.0.1:8080/agents/wordcount/ -clients 200 -duration 20s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "the agent's JSON-RPC endpoint (the card's url)")
	clients := flag.Int("clients", 200, "concurrent clients")
	duration := flag.Duration("duration", 20*time.Second, "how long to send")
	text := flag.String("text", "one two three four five", "the task text")
	sameContext := flag.Bool("same-context", false, "every client sends in one context of its own (else a new context per task)")
	plain := flag.Bool("plain", false, "count any 2xx answer as done, for a baseline route that is not an agent (a Caddy respond)")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "usage: a2aload -url <agent endpoint> [-clients n] [-duration d]")
		os.Exit(2)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: *clients}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failed    atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []time.Duration
			for n := 0; ctx.Err() == nil; n++ {
				msg := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d-%d", c, n), "role": "user",
					"parts": []any{map[string]any{"kind": "text", "text": *text}}}
				if *sameContext {
					msg["contextId"] = fmt.Sprintf("ctx_load_%d", c)
				}
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": "message/send", "params": map[string]any{"message": msg}})
				t0 := time.Now()
				ok := send(hc, *url, body, *plain)
				if ctx.Err() != nil {
					break // cut off by the end of the run: not counted
				}
				if !ok {
					failed.Add(1)
					continue
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	fmt.Printf("clients %d, %s: %d completed, %d failed, %.0f tasks/s, p50 %s, p99 %s\n", *clients, elapsed.Round(time.Millisecond),
		len(latencies), failed.Load(), float64(len(latencies))/elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond))
}

// send posts one message/send and reports whether the task completed (plain: whether
// the answer was 2xx).
func send(hc *http.Client, url string, body []byte, plain bool) bool {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if plain {
		return resp.StatusCode/100 == 2
	}
	var r struct {
		Result struct {
			Status struct{ State string }
		}
	}
	return json.Unmarshal(data, &r) == nil && r.Result.Status.State == "completed"
}
