package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/capsulegate/capsulegate/a2a"
)

// shout is an Executor that answers in capitals.
type shout struct{}

func (shout) Execute(_ context.Context, job *a2a.Job) a2a.Outcome {
	return a2a.Outcome{State: "completed", Text: strings.ToUpper(job.Text)}
}

func ExampleNewHandler() {
	h, err := a2a.NewHandler(a2a.Config{
		Card:     a2a.Card{Name: "shout", Description: "answers in capitals", Version: "1.0.0"},
		Executor: shout{},
	})
	if err != nil {
		panic(err)
	}
	defer h.Shutdown(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/agents/shout/", h) // the handler sees the full path: the prefix is free
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message":
		{"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hello"}]}}}`
	resp, err := http.Post(srv.URL+"/agents/shout/", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Status    struct{ State string }
			Artifacts []struct{ Parts []struct{ Text string } }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		panic(err)
	}
	fmt.Println(out.Result.Status.State, out.Result.Artifacts[0].Parts[0].Text)
	// Output: completed HELLO
}
