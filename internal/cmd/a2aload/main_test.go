package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/taskdb"
)

type okExec struct{}

func (okExec) Execute(context.Context, *a2a.Job) a2a.Outcome {
	return a2a.Outcome{State: "completed", Text: "ok"}
}

// TestVerifyAgainstHandler loads an A2A handler with its task store from 32 clients and
// verifies the tasks: every one answered is listed once, completed, and nothing else.
func TestVerifyAgainstHandler(t *testing.T) {
	db, err := taskdb.Open(filepath.Join(t.TempDir(), "tasks.db"), taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h, err := a2a.NewHandler(a2a.Config{Card: a2a.Card{Name: "load"}, Executor: okExec{}, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() { _ = h.Shutdown(context.Background()) }() // before db.Close

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: time.Minute}
	cfg := loadConfig{url: srv.URL + "/", clients: 32, tasks: 300, duration: time.Minute, text: "hi"}
	var runs []loadResult
	for range 2 { // the second run's list holds the first's tasks too, which it must skip
		res := load(hc, cfg)
		if len(res.answered) != cfg.tasks || res.failed != 0 {
			t.Fatalf("load: %d answered, %d failed, want %d and 0", len(res.answered), res.failed, cfg.tasks)
		}
		runs = append(runs, res)
	}
	list, err := listTasks(hc, cfg.url)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2*cfg.tasks {
		t.Fatalf("listed %d tasks, want %d", len(list), 2*cfg.tasks)
	}
	for _, res := range runs {
		v := verifyTasks(res.answered, res.failed, list, res.prefix)
		if !v.ok() || v.answered != cfg.tasks || v.listed != cfg.tasks {
			t.Errorf("verify: %s", v)
		}
	}
}

// TestVerifyFinds checks each kind of wrong is reported, on lists made by hand.
func TestVerifyFinds(t *testing.T) {
	const prefix = "m-run-"
	answered := []answer{{"t1", "m-run-0-0", "completed"}, {"t2", "m-run-0-1", "completed"}, {"t3", "m-run-1-0", "completed"}}
	good := []listed{
		{"t3", "TASK_STATE_COMPLETED", "m-run-1-0"},
		{"old", "TASK_STATE_COMPLETED", "m-other-0-0"}, // another run's: ignored
		{"t2", "TASK_STATE_COMPLETED", "m-run-0-1"},
		{"t1", "TASK_STATE_COMPLETED", "m-run-0-0"},
	}
	if v := verifyTasks(answered, 0, good, prefix); !v.ok() || v.answered != 3 || v.listed != 3 {
		t.Fatalf("a good list: %s", v)
	}
	for _, tc := range []struct {
		name     string
		answered []answer
		failed   int64
		list     []listed
		want     string
	}{
		{"lost", answered, 0, good[1:], "1 answered completed but not listed (lost): t3"},
		{"repeated", answered, 0, append(good, good[0]), "1 listed more than once: t3"},
		{"not completed", answered, 0, append([]listed{{"t3", "TASK_STATE_WORKING", "m-run-1-0"}}, good[1:]...), "1 listed but not completed: t3"},
		{"extra", answered, 0, append(good, listed{"t4", "TASK_STATE_COMPLETED", "m-run-1-1"}), "1 listed but never answered completed (an extra task): t4"},
		{"answered failed", append(answered, answer{"t4", "m-run-1-1", "failed"}), 0, good, "1 answered but not completed: t4 (failed)"},
		{"another message", answered, 0, append([]listed{{"t3", "TASK_STATE_COMPLETED", "m-run-1-9"}}, good[1:]...), "1 listed with another messageId"},
		{"a send failed", answered, 1, good, "1 sends failed"},
	} {
		v := verifyTasks(tc.answered, tc.failed, tc.list, prefix)
		if v.ok() || !strings.Contains(v.String(), tc.want) || !strings.HasPrefix(v.String(), "verify FAILED") {
			t.Errorf("%s: got %q, want FAILED with %q", tc.name, v, tc.want)
		}
	}
}
