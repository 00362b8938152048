package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestDevAgentCallbackAllow: the dev agent takes -callback-allow as
// drover server does: a batch may name a callback under the allowed
// destination (and the leader POSTs the complete batch there), not
// another, and a hostile path under it is refused naming the problem.
func TestDevAgentCallbackAllow(t *testing.T) {
	got := make(chan string, 4)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.URL.Path
	}))
	defer hooks.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		m := &Main{Stdout: &out, Stderr: &out}
		runErr = m.Run(ctx, []string{"agent", "-dev", "-workers", "0", "-example-rates=false", "-http-addr", "127.0.0.1:0",
			"-data-dir", dir, "-log-level", "warn", "-callback-allow", "http://192.0.2.1/elsewhere/", "-callback-allow", hooks.URL + "/hooks/"})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
			if runErr != nil && !t.Failed() {
				t.Errorf("agent: %v", runErr)
			}
		case <-time.After(30 * time.Second):
			t.Error("the agent did not stop")
		}
	}()
	var c *api.Client
	for deadline := time.Now().Add(60 * time.Second); c == nil; {
		addr, err1 := os.ReadFile(filepath.Join(dir, "api.addr"))
		tok, err2 := os.ReadFile(filepath.Join(dir, "root.token"))
		if err1 == nil && err2 == nil && len(tok) > 0 {
			c = api.NewClient(strings.TrimSpace(string(addr)), strings.TrimSpace(string(tok)))
			break
		}
		select {
		case <-done:
			t.Fatalf("the agent stopped: %v\n%s", runErr, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not start:\n%s", out.String())
		}
	}
	for raw, want := range map[string]string{
		hooks.URL + "/other":          "is not under a destination the servers allow",
		hooks.URL + "/hooks/..;/x":    `has a ";" in its path`,
		"http://192.0.2.2/elsewhere/": "is not under a destination the servers allow",
	} {
		_, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Callback: raw})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !strings.Contains(ae.Message, want) {
			t.Errorf("callback %s: %v; want a 400 saying %q", raw, err, want)
		}
	}
	// A batch of no jobs is complete once made: its callback is POSTed.
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Callback: hooks.URL + "/hooks/done"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "/hooks/done" {
			t.Errorf("POSTed to %s", p)
		}
	case <-time.After(30 * time.Second):
		b, err := c.GetBatch(ctx, res.ID)
		t.Fatalf("batch %d's callback was not POSTed: %+v, %v", res.ID, b, err)
	}
}

// syncBuffer is a bytes.Buffer the agent's goroutines may write to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
