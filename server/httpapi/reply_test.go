package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// TestWrapWritesEveryReply drives wrap with handlers that return each kind
// of value and error, and checks the status, headers and body the caller
// gets: what every JSON endpoint now answers through.
func TestWrapWritesEveryReply(t *testing.T) {
	cause := fs.ErrNotExist
	jsonError := func(msg string) string { return fmt.Sprintf("{\"error\":%q}\n", msg) }
	cases := []struct {
		name     string
		accept   string
		h        handlerFunc
		code     int
		body     string // exact; "" with code 204: no body
		ctype    string
		header   [2]string // one header the handler set, kept
		loggedAs string    // the error log's text, if logged
	}{
		{name: "coded error keeps its status and message",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, codedf(http.StatusConflict, "batch %d is finished; submit a new batch", 7)
			},
			code: http.StatusConflict, body: jsonError("batch 7 is finished; submit a new batch"), ctype: "application/json"},
		{name: "coded error with a cause says only its message",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, &CodedError{Code: http.StatusServiceUnavailable, Msg: "history store is down; retry later", Err: cause}
			},
			code: http.StatusServiceUnavailable, body: jsonError("history store is down; retry later"), ctype: "application/json"},
		{name: "coded error wrapped in context keeps its status and message",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, fmt.Errorf("read batch: %w", coded(http.StatusNotFound, "batch 9 does not exist"))
			},
			code: http.StatusNotFound, body: jsonError("batch 9 does not exist"), ctype: "application/json"},
		{name: "a coded error's headers are kept",
			h: func(w http.ResponseWriter, _ *http.Request) (any, error) {
				w.Header().Set("Retry-After", "3")
				return nil, coded(http.StatusTooManyRequests, "slow down; retry after 3s")
			},
			code: http.StatusTooManyRequests, body: jsonError("slow down; retry after 3s"), ctype: "application/json",
			header: [2]string{"Retry-After", "3"}},
		{name: "uncoded error is a logged 500",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, fmt.Errorf("open spool: %w", cause)
			},
			// As before the wrapper: the cause's text is shown after
			// "internal error: " (callers are authenticated users).
			code: http.StatusInternalServerError, body: jsonError("internal error: open spool: file does not exist"), ctype: "application/json",
			loggedAs: "open spool: file does not exist"},
		{name: "state machine refusal by its kind",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, &state.ApplyError{Kind: state.ErrNotFound, Msg: "no user bob"}
			},
			code: http.StatusNotFound, body: jsonError("no user bob"), ctype: "application/json"},
		{name: "lost leadership is a 503 naming the leader",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, fmt.Errorf("apply: %w", ErrNotLeader)
			},
			code: http.StatusServiceUnavailable, body: jsonError("this server is not the leader (the leader is server s2); retry (apply: this server is not the leader)"),
			ctype: "application/json"},
		{name: "abandoned request is a 503",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, context.DeadlineExceeded
			},
			code: http.StatusServiceUnavailable, body: jsonError("request cancelled or timed out: context deadline exceeded"), ctype: "application/json"},
		{name: "nil value is 204 without a body",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return nil, nil
			},
			code: http.StatusNoContent},
		{name: "value is 200 JSON, with the handler's headers",
			h: func(w http.ResponseWriter, _ *http.Request) (any, error) {
				w.Header().Set(HistoryUnavailableHeader, "store down")
				return api.BatchList{Batches: []api.Batch{}}, nil
			},
			code: http.StatusOK, body: "{\"batches\":[]}\n", ctype: "application/json", header: [2]string{HistoryUnavailableHeader, "store down"}},
		{name: "a typed nil value is still 200 JSON",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				var none []api.Batch
				return none, nil
			},
			code: http.StatusOK, body: "null\n", ctype: "application/json"},
		{name: "withStatus sets the status",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return withStatus(http.StatusCreated, map[string]string{"deleted": "x"}), nil
			},
			code: http.StatusCreated, body: "{\"deleted\":\"x\"}\n", ctype: "application/json"},
		{name: "a bulk value is JSON unless MessagePack is asked for",
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return bulk(http.StatusCreated, map[string]int{"accepted": 2}), nil
			},
			code: http.StatusCreated, body: "{\"accepted\":2}\n", ctype: "application/json"},
		{name: "only a bulk value is answered in MessagePack",
			accept: api.MsgpackContentType,
			h: func(http.ResponseWriter, *http.Request) (any, error) {
				return map[string]int{"accepted": 2}, nil
			},
			code: http.StatusOK, body: "{\"accepted\":2}\n", ctype: "application/json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil)), node: &fakeNode{leaderID: "s2"}}
			req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			rec := httptest.NewRecorder()
			s.wrap(tc.h)(rec, req)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Fatalf("answered %d %q; want %d %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if got := rec.Header().Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q; want %q", got, tc.ctype)
			}
			if tc.header[0] != "" && rec.Header().Get(tc.header[0]) != tc.header[1] {
				t.Errorf("header %s is %q; want %q (set by the handler)", tc.header[0], rec.Header().Get(tc.header[0]), tc.header[1])
			}
			switch {
			case tc.loggedAs != "" && !strings.Contains(logged.String(), tc.loggedAs):
				t.Errorf("log %q does not hold the cause %q", logged.String(), tc.loggedAs)
			case tc.loggedAs == "" && logged.Len() > 0:
				t.Errorf("logged %q for an error the caller can act on", logged.String())
			}
		})
	}
}

// TestWrapAnswersMessagePackWhenAsked checks that a bulk value is encoded
// as MessagePack for a client that asks, with the status kept.
func TestWrapAnswersMessagePackWhenAsked(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler), node: &fakeNode{}}
	want := api.UpdateResponse{BatchID: 3, UpdateID: 1, StartJobID: 1, NJobs: 5}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/batches/3/updates", nil)
	req.Header.Set("Accept", api.MsgpackContentType)
	rec := httptest.NewRecorder()
	s.wrap(func(http.ResponseWriter, *http.Request) (any, error) { return bulk(http.StatusCreated, want), nil })(rec, req)
	if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != api.MsgpackContentType {
		t.Fatalf("answered %d %s; want 201 %s", rec.Code, rec.Header().Get("Content-Type"), api.MsgpackContentType)
	}
	var got api.UpdateResponse
	if err := api.UnmarshalMsgpack(rec.Body.Bytes(), &got); err != nil || got != want {
		t.Fatalf("decoded %+v (%v); want %+v", got, err, want)
	}
}

// TestCodedErrorKeepsItsCause checks that codedf's %w keeps the cause for
// errors.Is while the message reads as the format says.
func TestCodedErrorKeepsItsCause(t *testing.T) {
	cause := errors.New("connection refused")
	err := codedf(http.StatusServiceUnavailable, "batch %d is not in memory and the history store failed: %w; retry later", 4, cause)
	var ce *CodedError
	if !errors.As(err, &ce) || ce.Code != http.StatusServiceUnavailable || !errors.Is(err, cause) {
		t.Fatalf("codedf gave %#v; want a 503 CodedError wrapping the cause", err)
	}
	if want := "batch 4 is not in memory and the history store failed: connection refused; retry later"; err.Error() != want {
		t.Fatalf("message %q; want %q", err.Error(), want)
	}
	if err := codedf(http.StatusBadRequest, "n_jobs is %d", -1); errors.Unwrap(err) != nil {
		t.Fatalf("codedf without %%w has cause %v", errors.Unwrap(err))
	}
}
