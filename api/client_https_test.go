package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPlainHTTPToAnHTTPSServerSaysWhatToDo: an http:// address of a
// server that serves HTTPS gets Go's "Client sent an HTTP request to an
// HTTPS server"; the client says to use https:// and the CA instead.
func TestPlainHTTPToAnHTTPSServerSaysWhatToDo(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	plain := "http://" + strings.TrimPrefix(srv.URL, "https://")
	_, err := NewClient(plain, "tok").Leader(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serves HTTPS: use "+srv.URL) || !strings.Contains(err.Error(), "DROVER_CACERT") {
		t.Fatalf("error: %v", err)
	}
}
