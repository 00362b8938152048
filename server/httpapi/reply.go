package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// Every JSON endpoint is a handlerFunc: it returns the value to answer
// with, or an error, and wrap writes the reply. So the status an error is
// answered with, the error body's shape, the content type and the logging
// of failures are decided here once, not in each handler (Nomad's
// command/agent endpoints work the same way). Endpoints that stream (job
// logs, snapshots, metrics) or hold a request open (worker syncs) write
// their own bodies but answer their errors with writeErr.

// CodedError is an error the API answers with its own HTTP status code
// and a message the caller can act on, rather than a 500. Err, when set, is
// the cause: kept for errors.Is and errors.As, never shown beyond Msg.
type CodedError struct {
	Code int    // HTTP status code, 4xx or 5xx
	Msg  string // what the caller is told
	Err  error  // the cause (may be nil)
}

// Error returns the message the caller is told.
func (e *CodedError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *CodedError) Unwrap() error { return e.Err }

// coded is an error answered with code and msg.
func coded(code int, msg string) error { return &CodedError{Code: code, Msg: msg} }

// codedf is coded with a formatted message; a %w verb wraps its operand
// as the cause.
func codedf(code int, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &CodedError{Code: code, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// codedErr is err answered with code and its own text.
func codedErr(code int, err error) error { return &CodedError{Code: code, Msg: err.Error(), Err: err} }

// badRequest is err answered 400 with its own text: the caller sent
// something invalid, and err says what.
func badRequest(err error) error { return codedErr(http.StatusBadRequest, err) }

// handlerFunc is a JSON endpoint. The value it returns is answered as
// JSON with 200 (a response sets another status, or allows MessagePack);
// a nil value is answered 204 without a body; an error is answered by
// writeErr. A handler may set headers on w, but never writes a body.
type handlerFunc func(w http.ResponseWriter, r *http.Request) (any, error)

// response is a handler's value with a status other than 200, or one that
// may be answered in MessagePack.
type response struct {
	code  int
	value any
	// msgpack: answered in MessagePack when the request asks for it
	// (Accept), as the bulk endpoints are.
	msgpack bool
}

// withStatus answers v with code.
func withStatus(code int, v any) response { return response{code: code, value: v} }

// createdStatus is the status of a create: 201, or 200 when it repeats
// an earlier request (the same idempotency key, or a retry that finds what
// its first try made).
func createdStatus(repeat bool) int {
	if repeat {
		return http.StatusOK
	}
	return http.StatusCreated
}

// bulk answers v with code, in MessagePack when the request asks for it.
func bulk(code int, v any) response { return response{code: code, value: v, msgpack: true} }

// wrap turns a handlerFunc into the http.HandlerFunc the route table
// registers: it calls h and writes its value or its error.
func (s *Server) wrap(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := h(w, r)
		if err != nil {
			s.writeErr(w, err)
			return
		}
		s.writeValue(w, r, v)
	}
}

// writeValue answers a handler's value.
func (s *Server) writeValue(w http.ResponseWriter, r *http.Request, v any) {
	code, msgpack := http.StatusOK, false
	if rv, ok := v.(response); ok {
		code, v, msgpack = rv.code, rv.value, rv.msgpack
	}
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !msgpack || r.Header.Get("Accept") != api.MsgpackContentType {
		writeJSON(w, code, v)
		return
	}
	data, err := api.MarshalMsgpack(v)
	if err != nil {
		s.writeErr(w, fmt.Errorf("encode msgpack: %w", err))
		return
	}
	w.Header().Set("Content-Type", api.MsgpackContentType)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// applyErrorCodes are the statuses of the state machine's refusals.
var applyErrorCodes = map[state.ErrorKind]int{
	state.ErrInvalid: http.StatusBadRequest, state.ErrNotFound: http.StatusNotFound,
	state.ErrConflict: http.StatusConflict, state.ErrForbidden: http.StatusForbidden,
	state.ErrUnauthorized: http.StatusUnauthorized,
}

// writeErr answers an error in the API's error shape (api.ErrorResponse):
// a CodedError with its code and message, a refusal of the state machine
// by its kind, a lost leader or an abandoned request with 503, anything
// else with 500 (logged).
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	var ce *CodedError
	var ae *state.ApplyError
	switch {
	case errors.As(err, &ce):
		writeError(w, ce.Code, ce.Msg)
	case errors.As(err, &ae):
		code := applyErrorCodes[ae.Kind]
		if code == 0 {
			code = http.StatusBadRequest
		}
		writeError(w, code, ae.Msg)
	case errors.Is(err, ErrNotLeader):
		// Also answered before authentication (a consistent read that
		// finds leadership gone): the leader by ID, not its Raft address.
		_, id := s.node.Leader()
		msg := "no cluster leader right now; retry in a few seconds"
		if id != "" {
			msg = fmt.Sprintf("this server is not the leader (the leader is server %s); retry", id)
		}
		writeError(w, http.StatusServiceUnavailable, msg+" ("+err.Error()+")")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "request cancelled or timed out: "+err.Error())
	default:
		s.log.Error("internal error", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: "+err.Error())
	}
}

// writeError writes the API's error shape; only writeErr calls it.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.ErrorResponse{Error: msg})
}
