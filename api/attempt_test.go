package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestASlowServerIsNamedAsSlow: an attempt cut off by the client's own
// deadline is reported as no answer in that time, not as a cancelled
// context the caller never cancelled.
func TestASlowServerIsNamedAsSlow(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(srv.URL, "t")
	c.AttemptTimeout, c.RetryUnreachable = 50*time.Millisecond, 0
	_, err := c.Whoami(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") || strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("a server that does not answer: %v", err)
	}
}
