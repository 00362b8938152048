package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/money"
)

// LeaderHeader, on a response, names the leader's HTTP address; clients
// that know that server switch to it and skip a forwarding hop.
const LeaderHeader = "X-Drover-Leader"

// LogIncompleteHeader, on a job log, says why the log may be missing parts
// (a server that holds chunks of it did not answer); absent when whole.
const LogIncompleteHeader = "X-Drover-Log-Incomplete"

// LogTruncatedHeader, on a job's log, says why a server cut the log (its
// last line says so too): the attempt, its batch or its billing project
// reached a limit on the logs a server keeps.
const LogTruncatedHeader = "X-Drover-Log-Truncated"

// LogSizeHeader, on a job's log, is the size in bytes of the whole log
// the server found (a read from ?offset=N sends the bytes from N on).
const LogSizeHeader = "X-Drover-Log-Size"

// DefaultAddr is the server the CLI talks to when DROVER_ADDR is unset.
const DefaultAddr = "http://127.0.0.1:4650"

// Error is a non-2xx answer from a server.
type Error struct {
	StatusCode int
	Message    string
	// RetryAfter is the wait a 429 asked for (its Retry-After header);
	// zero when the server gave none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode)
}

// IsStatus reports whether err is an API error with the given HTTP status.
func IsStatus(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == code
}

// Client talks to one or more drover servers. When a server cannot be
// reached the client moves on to the next one.
type Client struct {
	addrs []string
	http  *http.Client

	// RetryUnavailable is how long calls keep retrying while servers
	// answer 503 (starting, electing a leader). RetryUnreachable is how
	// long they keep retrying while no server can be reached at all.
	RetryUnavailable time.Duration
	RetryUnreachable time.Duration
	// Stale asks the server a read (GET) reaches to answer from its own
	// copy of the state (?stale=true), which may be behind the leader's:
	// reads go on while there is no leader. DROVER_STALE=1 sets it.
	Stale bool
	// AttemptTimeout bounds how long one server may take to start
	// answering before the client gives up on it and tries the next (a
	// frozen server accepts connections but never answers).
	AttemptTimeout time.Duration
	// JSONOnly sends every request as JSON. By default the bulk endpoints
	// (worker syncs, job bunches, batch and update creation) travel as
	// MessagePack (see MsgpackContentType).
	JSONOnly bool

	mu    sync.Mutex
	token string
	next  int
	// setupErr fails every call: the client's TLS could not be set up.
	setupErr error
}

// TLSError is a server whose certificate could not be verified, or that
// would not take ours: retrying does not help.
type TLSError struct{ Err error }

func (e *TLSError) Error() string { return e.Err.Error() }
func (e *TLSError) Unwrap() error { return e.Err }

// tlsHint says what to do about a TLS failure ("" for other errors).
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown), errors.As(err, &verify):
		return "the server's certificate is not signed by the CA this client trusts: set DROVER_CACERT (the CLI) or -ca-file (workers) to the cluster's CA certificate"
	case errors.As(err, &hostname):
		return "the server's certificate does not name " + TLSServerName + ": make server certificates with `drover tls cert create -server`"
	case errors.As(err, &invalid):
		return "the server's certificate is not valid now (expired?)"
	case errors.As(err, &record):
		return "the server does not speak TLS: use an http:// address, or start the server with -tls-cert"
	case strings.Contains(err.Error(), "tls: certificate required"), strings.Contains(err.Error(), "tls: bad certificate"), strings.Contains(err.Error(), "tls: unknown certificate authority"):
		return "the server requires a client certificate signed by its -tls-ca: set DROVER_CLIENT_CERT and DROVER_CLIENT_KEY (make them with `drover tls cert create -client`)"
	}
	return ""
}

// NewClient returns a client for the comma-separated server addresses in addr.
func NewClient(addr, token string) *Client { return NewTLSClient(addr, token, nil) }

// NewTLSClient is NewClient for servers that serve HTTPS: they are
// verified with tlsConf (its RootCAs, and ServerName), which also carries
// a client certificate when the servers ask for one. Addresses without a
// scheme are https:// ones. A nil tlsConf is NewClient.
func NewTLSClient(addr, token string, tlsConf *tls.Config) *Client {
	scheme := "http://"
	if tlsConf != nil {
		scheme = "https://"
	}
	var addrs []string
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = scheme + a
		}
		addrs = append(addrs, strings.TrimRight(a, "/"))
	}
	if len(addrs) == 0 {
		addrs = []string{DefaultAddr}
		if tlsConf != nil {
			addrs = []string{"https://" + strings.TrimPrefix(DefaultAddr, "http://")}
		}
	}
	transport := newTransport()
	if tlsConf != nil {
		transport.TLSClientConfig = tlsConf.Clone()
	}
	return &Client{
		addrs:            addrs,
		token:            token,
		http:             &http.Client{Transport: transport},
		RetryUnavailable: 30 * time.Second,
		RetryUnreachable: 5 * time.Second,
		AttemptTimeout:   5 * time.Second,
	}
}

// NewClientHTTP is NewClient over a given http.Client (the web UI calls
// its own server's API in-process through one).
func NewClientHTTP(addr, token string, hc *http.Client) *Client {
	c := NewClient(addr, token)
	c.http = hc
	return c
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// TLSFromEnv is the TLS the CLI uses: DROVER_CACERT verifies the servers,
// DROVER_CLIENT_CERT and DROVER_CLIENT_KEY are sent when a server asks for
// a client certificate. Nil when DROVER_CACERT is unset.
func TLSFromEnv() (*tls.Config, error) {
	ca := os.Getenv("DROVER_CACERT")
	if ca == "" {
		return nil, nil
	}
	return TLSConfig(ca, os.Getenv("DROVER_CLIENT_CERT"), os.Getenv("DROVER_CLIENT_KEY"))
}

// TLSConfig verifies drover servers against the CA in caFile (their
// certificates name TLSServerName) and presents certFile when set.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: TLSServerName}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// TLSServerName is the name every drover server certificate carries;
// clients verify servers against it, whatever address they dial.
const TLSServerName = "server.drover"

// ClientFromEnv builds a client from DROVER_ADDR and DROVER_TOKEN, falling
// back to the default address and ~/.config/drover/token, with TLS from
// DROVER_CACERT (see TLSFromEnv). A CA or client certificate that cannot
// be read makes every call fail with the reason.
func ClientFromEnv() *Client {
	addr := os.Getenv("DROVER_ADDR")
	token := os.Getenv("DROVER_TOKEN")
	if token == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if b, err := os.ReadFile(filepath.Join(home, ".config", "drover", "token")); err == nil {
				token = strings.TrimSpace(string(b))
			}
		}
	}
	conf, err := TLSFromEnv()
	c := NewTLSClient(addr, token, conf)
	c.setupErr = err
	c.Stale, _ = strconv.ParseBool(os.Getenv("DROVER_STALE"))
	return c
}

// Addrs returns the server addresses the client uses.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// Token returns the bearer token the client sends.
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// SetToken replaces the bearer token.
func (c *Client) SetToken(token string) {
	c.mu.Lock()
	c.token = token
	c.mu.Unlock()
}

// Do sends a request with a JSON body (in may be nil) and decodes a JSON
// answer into out (may be nil). Connection failures move on to the next
// server; API errors are returned as *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, method, path, in, out, 0)
}

// do is Do with extra time allowed for the server to answer (long polls).
func (c *Client) do(ctx context.Context, method, path string, in, out any, extra time.Duration) error {
	return c.call(ctx, method, path, in, out, extra, false)
}

// doBulk is do for the endpoints that carry bulk data: the request and
// the answer travel as MessagePack unless the client is JSONOnly.
func (c *Client) doBulk(ctx context.Context, method, path string, in, out any, extra time.Duration) error {
	return c.call(ctx, method, path, in, out, extra, !c.JSONOnly)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any, extra time.Duration, binary bool) error {
	contentType := "application/json"
	if binary {
		contentType = MsgpackContentType
	}
	var body []byte
	if in != nil {
		var err error
		if binary {
			body, err = MarshalMsgpack(in)
		} else {
			body, err = json.Marshal(in)
		}
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	resp, err := c.sendWait(ctx, method, path, contentType, body, extra)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if resp.Header.Get("Content-Type") == MsgpackContentType {
		data, err := io.ReadAll(resp.Body)
		if err == nil {
			err = UnmarshalMsgpack(data, out)
		}
		if err != nil {
			return fmt.Errorf("decode response of %s %s: %w", method, path, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode response of %s %s: %w", method, path, err)
	}
	return nil
}

// send performs the request and returns a 2xx response or an error. It
// tries every server in turn; when all are unreachable it keeps trying for
// RetryUnreachable, and when servers answer 503 (no leader yet, still
// starting) for RetryUnavailable, so a CLI call rides out a restart or a
// leader election.
func (c *Client) send(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	return c.sendWait(ctx, method, path, contentType, body, 0)
}

func (c *Client) sendWait(ctx context.Context, method, path, contentType string, body []byte, extra time.Duration) (*http.Response, error) {
	start := time.Now()
	delay := 100 * time.Millisecond
	for {
		resp, err := c.sendOnce(ctx, method, path, contentType, body, extra)
		if err == nil {
			return resp, nil
		}
		var limit time.Duration
		var ae *Error
		var te *TLSError
		switch {
		case ctx.Err() != nil, errors.As(err, &te):
			return nil, err
		case errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable:
			limit = c.RetryUnavailable
		case errors.As(err, &ae) && ae.StatusCode == http.StatusTooManyRequests && ae.RetryAfter > 0:
			// Rate limited: nothing was done; wait as long as asked.
			limit = c.RetryUnavailable
			delay = max(delay, ae.RetryAfter)
		case errors.As(err, &ae):
			return nil, err
		default:
			limit = c.RetryUnreachable
		}
		if time.Since(start)+delay > limit {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// sendOnce tries each server once.
func (c *Client) sendOnce(ctx context.Context, method, path, contentType string, body []byte, extra time.Duration) (*http.Response, error) {
	if c.setupErr != nil {
		return nil, c.setupErr
	}
	c.mu.Lock()
	start, token := c.next, c.token
	c.mu.Unlock()
	// A server's own answer (503: no leader, starting) says more than a
	// connection refused by a dead one: report it when there is one.
	var lastErr, answered error
	for i := 0; i < len(c.addrs); i++ {
		idx := (start + i) % len(c.addrs)
		// The attempt's context is cancelled if no answer starts in time;
		// once headers arrive the body is read under the caller's ctx.
		actx, cancel := context.WithCancel(ctx)
		var timer *time.Timer
		if c.AttemptTimeout > 0 {
			timer = time.AfterFunc(c.AttemptTimeout+extra, cancel)
		}
		target := c.addrs[idx] + path
		if c.Stale && method == http.MethodGet && !strings.Contains(path, "stale=") {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			target += sep + "stale=true"
		}
		req, err := http.NewRequestWithContext(actx, method, target, bytes.NewReader(body))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("build request: %w", err)
		}
		if body != nil {
			req.Header.Set("Content-Type", contentType)
		}
		if contentType == MsgpackContentType {
			req.Header.Set("Accept", MsgpackContentType)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.http.Do(req)
		if err == nil && timer != nil && !timer.Stop() {
			// The deadline passed just as the answer came: its body is
			// unreadable now.
			resp.Body.Close()
			err = fmt.Errorf("no answer within %s", c.AttemptTimeout+extra)
		}
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if timer != nil && !timer.Stop() {
				// Our own deadline cancelled the attempt: say so, not
				// "context canceled".
				err = fmt.Errorf("no answer within %s", c.AttemptTimeout+extra)
			}
			if hint := tlsHint(err); hint != "" {
				// Retrying will not change a certificate.
				return nil, &TLSError{Err: fmt.Errorf("%s %s: %w; %s", method, c.addrs[idx], err, hint)}
			}
			lastErr = fmt.Errorf("no drover server reachable: %s %s: %w", method, c.addrs[idx], err)
			continue
		}
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		next := idx
		if hint := resp.Header.Get(LeaderHeader); hint != "" {
			// Talk to the leader directly from now on, if we know it.
			for k, a := range c.addrs {
				if strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://") == hint {
					next = k
				}
			}
		}
		if next != start {
			c.mu.Lock()
			c.next = next
			c.mu.Unlock()
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var e ErrorResponse
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
			if e.Error == "" {
				e.Error = http.StatusText(resp.StatusCode)
			}
		}
		if resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(e.Error, "Client sent an HTTP request to an HTTPS server") {
			// Go's server answers a plain request on a TLS port so; say
			// what to do instead. Retrying will not change it.
			https := "https://" + strings.TrimPrefix(c.addrs[idx], "http://")
			return nil, &TLSError{Err: fmt.Errorf("the server at %s serves HTTPS: use %s (in DROVER_ADDR) with the cluster's CA certificate in DROVER_CACERT", c.addrs[idx], https)}
		}
		ae := &Error{StatusCode: resp.StatusCode, Message: e.Error}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 && resp.StatusCode == http.StatusTooManyRequests {
			ae.RetryAfter = time.Duration(secs) * time.Second
		}
		answered = ae
		// A server without a leader may be one of several; try the others.
		if resp.StatusCode == http.StatusServiceUnavailable {
			continue
		}
		return nil, answered
	}
	if answered != nil {
		return nil, answered
	}
	return nil, lastErr
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Health checks that a server answers.
func (c *Client) Health(ctx context.Context) error {
	return c.Do(ctx, http.MethodGet, "/api/v1/health", nil, nil)
}

// CreateBatch creates a batch (see CreateBatchRequest). A request without
// an idempotency key gets a fresh one (set in req), so a retry after a lost
// answer returns the batch the first try made.
func (c *Client) CreateBatch(ctx context.Context, req *CreateBatchRequest) (*CreateBatchResponse, error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = NewIdempotencyKey()
	}
	var out CreateBatchResponse
	if err := c.doBulk(ctx, http.MethodPost, "/api/v1/batches", req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateUpdate opens (or, with inline jobs, commits) an update of a batch.
// Without an idempotency key it gets a fresh one, as in CreateBatch.
func (c *Client) CreateUpdate(ctx context.Context, batchID int64, req *CreateUpdateRequest) (*UpdateResponse, error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = NewIdempotencyKey()
	}
	var out UpdateResponse
	if err := c.doBulk(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/updates", batchID), req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// AddJobs posts one bunch of jobs to an open update.
func (c *Client) AddJobs(ctx context.Context, batchID, updateID int64, jobs []JobSpec) error {
	return c.doBulk(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/updates/%d/jobs", batchID, updateID),
		&AddJobsRequest{Jobs: jobs}, nil, 0)
}

// CommitUpdate makes an update's jobs visible and schedulable.
func (c *Client) CommitUpdate(ctx context.Context, batchID, updateID int64) (*UpdateResponse, error) {
	var out UpdateResponse
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/updates/%d/commit", batchID, updateID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetBatch returns a batch's status.
func (c *Client) GetBatch(ctx context.Context, id int64) (*Batch, error) {
	var out Batch
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListBatches returns one page of batches matching the filter, newest first,
// with IDs below lastID (0: from the newest).
func (c *Client) ListBatches(ctx context.Context, filter string, lastID int64) (*BatchList, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("q", filter)
	}
	if lastID > 0 {
		q.Set("last_id", strconv.FormatInt(lastID, 10))
	}
	var out BatchList
	if err := c.Do(ctx, http.MethodGet, "/api/v1/batches?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelBatch cancels a batch: no job starts any more, running jobs are
// killed, and no further updates are accepted.
func (c *Client) CancelBatch(ctx context.Context, id int64) error {
	return c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/cancel", id), nil, nil)
}

// JobGroups lists a batch's job groups, parents before their children.
func (c *Client) JobGroups(ctx context.Context, batch int64) ([]JobGroup, error) {
	var out JobGroupList
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/job-groups", batch), nil, &out); err != nil {
		return nil, err
	}
	return out.JobGroups, nil
}

// JobGroup reads one job group of a batch, by its path or its ID.
func (c *Client) JobGroup(ctx context.Context, batch int64, group string) (*JobGroup, error) {
	var out JobGroup
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/job-groups/%s", batch, url.PathEscape(group)), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelJobGroup cancels a job group of a batch (by its path or its ID)
// and the groups below it.
func (c *Client) CancelJobGroup(ctx context.Context, batch int64, group string) (*JobGroupCancelResponse, error) {
	var out JobGroupCancelResponse
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/job-groups/%s/cancel", batch, url.PathEscape(group)), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryBatch runs final jobs of a batch again (see RetryRequest).
func (c *Client) RetryBatch(ctx context.Context, id int64, req *RetryRequest) (*RetryResponse, error) {
	var out RetryResponse
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/retry", id), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchEfficiency measures a batch's jobs' use against their request.
func (c *Client) BatchEfficiency(ctx context.Context, id int64) (*Efficiency, error) {
	var out Efficiency
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/efficiency", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EfficiencyQuery selects a report over a period: of a billing project's
// batches, of a user's (empty both: the caller's), or of a user's in a
// billing project, on days From..To (YYYY-MM-DD, UTC; empty: the 30 days
// before today, and today).
type EfficiencyQuery struct {
	BillingProject string
	User           string
	From, To       string
}

// PeriodEfficiency measures what the jobs of a billing project's batches,
// or of a user's, asked for against what they used over a period.
func (c *Client) PeriodEfficiency(ctx context.Context, q EfficiencyQuery) (*EfficiencyPeriod, error) {
	v := url.Values{}
	for k, val := range map[string]string{"billing_project": q.BillingProject, "user": q.User, "from": q.From, "to": q.To} {
		if val != "" {
			v.Set(k, val)
		}
	}
	path := "/api/v1/efficiency"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out EfficiencyPeriod
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RestartJob stops a running job's attempt (SIGTERM, its grace, SIGKILL)
// and runs the job again, counted against none of its retries.
func (c *Client) RestartJob(ctx context.Context, batch, job int64) (*JobRestart, error) {
	var out JobRestart
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/jobs/%d/restart", batch, job), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchStages returns the first stages of a batch's DAG.
func (c *Client) BatchStages(ctx context.Context, id int64) (*BatchStages, error) {
	var out BatchStages
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/stages", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListJobs returns one page of a batch's jobs matching the filter, with IDs
// above lastID.
func (c *Client) ListJobs(ctx context.Context, batchID int64, filter string, lastID int64) (*JobList, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("q", filter)
	}
	if lastID > 0 {
		q.Set("last_id", strconv.FormatInt(lastID, 10))
	}
	var out JobList
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/jobs?%s", batchID, q.Encode()), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllJobs pages through every job of a batch matching the filter.
func (c *Client) AllJobs(ctx context.Context, batchID int64, filter string) ([]Job, error) {
	all, _, err := Pages(true, 0, func(last int64) ([]Job, int64, error) {
		page, err := c.ListJobs(ctx, batchID, filter, last)
		if err != nil {
			return nil, 0, err
		}
		return page.Jobs, page.LastID, nil
	})
	return all, err
}

// GetJob returns one job's status and attempts.
func (c *Client) GetJob(ctx context.Context, batchID, jobID int64) (*Job, error) {
	var out Job
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/jobs/%d", batchID, jobID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobLog returns the log of a job's attempt (0: the latest).
// A log that may be missing parts is returned with an *IncompleteLogError
// alongside what could be read.
func (c *Client) JobLog(ctx context.Context, batchID, jobID int64, attempt int) ([]byte, error) {
	l, err := c.OpenJobLog(ctx, batchID, jobID, attempt)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	data, err := io.ReadAll(l)
	if err != nil {
		return data, err
	}
	if l.Incomplete != "" {
		return data, &IncompleteLogError{Reason: l.Incomplete}
	}
	return data, nil
}

// IncompleteLogError says a log was read but may be missing parts.
type IncompleteLogError struct{ Reason string }

func (e *IncompleteLogError) Error() string { return "the log may be incomplete: " + e.Reason }

// JobLogStream is a job's log being read.
type JobLogStream struct {
	io.ReadCloser
	// Incomplete, when not empty, says why the log may be missing parts
	// (a server holding some of it did not answer).
	Incomplete string
	// Truncated, when not empty, says why a server cut the log (a limit
	// on the logs it keeps); the log's last line says so too.
	Truncated string
	// Size is the whole log's size in bytes, Attempt the attempt it is
	// of (0: the server did not say).
	Size    int64
	Attempt int
}

// OpenJobLog starts reading the log of a job's attempt (0: the latest) as
// the server streams it. Close it when done.
func (c *Client) OpenJobLog(ctx context.Context, batchID, jobID int64, attempt int) (*JobLogStream, error) {
	return c.OpenJobLogAt(ctx, batchID, jobID, attempt, 0)
}

// OpenJobLogAt is OpenJobLog from a byte offset of the log on (a reader
// following a log asks for what it has not seen). Size is the whole
// log's size then, Attempt the attempt read.
func (c *Client) OpenJobLogAt(ctx context.Context, batchID, jobID int64, attempt int, offset int64) (*JobLogStream, error) {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if offset > 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
	}
	path := fmt.Sprintf("/api/v1/batches/%d/jobs/%d/log", batchID, jobID)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	size, _ := strconv.ParseInt(resp.Header.Get(LogSizeHeader), 10, 64)
	at, _ := strconv.Atoi(resp.Header.Get("X-Drover-Attempt"))
	return &JobLogStream{ReadCloser: resp.Body, Incomplete: resp.Header.Get(LogIncompleteHeader), Truncated: resp.Header.Get(LogTruncatedHeader),
		Size: size, Attempt: at}, nil
}

// AttemptUsage reads an attempt's usage over time (attempt 0: the
// latest).
func (c *Client) AttemptUsage(ctx context.Context, batchID, jobID int64, attempt int) (*AttemptUsage, error) {
	path := fmt.Sprintf("/api/v1/batches/%d/jobs/%d/usage", batchID, jobID)
	if attempt > 0 {
		path += "?attempt=" + strconv.Itoa(attempt)
	}
	var out AttemptUsage
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WatchChanges follows the change stream from after index (0: from
// now) for the topic terms ("Batch:12", "Job:12/*", "Queue"; none: every
// topic), calling fn with each frame, the first as soon as the stream
// opens, until fn returns an error (returned), ctx ends or the server
// ends the stream (nil: resume from the last frame's Index).
func (c *Client) WatchChanges(ctx context.Context, index uint64, topics []string, fn func(*ChangeFrame) error) error {
	q := url.Values{}
	if index > 0 {
		q.Set("index", strconv.FormatUint(index, 10))
	}
	for _, t := range topics {
		q.Add("topic", t)
	}
	path := "/api/v1/changes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var f ChangeFrame
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read the change stream: %w", err)
		}
		if err := fn(&f); err != nil {
			return err
		}
	}
}

// WaitBatch polls until the batch is complete or ctx ends. progress, when not
// nil, is called with every status seen.
func (c *Client) WaitBatch(ctx context.Context, id int64, progress func(*Batch)) (*Batch, error) {
	delay := 100 * time.Millisecond
	for {
		b, err := c.GetBatch(ctx, id)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			progress(b)
		}
		if b.Complete() {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay = delay * 3 / 2
		}
	}
}

// CreateUser creates a user and returns it with its token. The token is
// made here (set in req when empty), so a retry after a lost answer
// returns the same user and token instead of a conflict.
func (c *Client) CreateUser(ctx context.Context, req *CreateUserRequest) (*User, error) {
	if req.Token == "" {
		req.Token = NewToken()
	}
	var out User
	if err := c.Do(ctx, http.MethodPost, "/api/v1/users", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RotateToken gives a user a new token (admin only) and returns it; the
// old token stops working.
func (c *Client) RotateToken(ctx context.Context, user string) (*User, error) {
	req := &RotateTokenRequest{Token: NewToken()}
	var out User
	if err := c.Do(ctx, http.MethodPost, "/api/v1/users/"+url.PathEscape(user)+"/token", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Whoami returns the user the client's token belongs to.
func (c *Client) Whoami(ctx context.Context) (*User, error) {
	var out User
	if err := c.Do(ctx, http.MethodGet, "/api/v1/whoami", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListUsers lists users (admin only).
func (c *Client) ListUsers(ctx context.Context) ([]User, error) {
	var out []User
	if err := c.Do(ctx, http.MethodGet, "/api/v1/users", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateBillingProject creates a billing project.
func (c *Client) CreateBillingProject(ctx context.Context, req *CreateBillingProjectRequest) (*BillingProject, error) {
	var out BillingProject
	if err := c.Do(ctx, http.MethodPost, "/api/v1/billing-projects", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListBillingProjects lists the billing projects the caller can see.
func (c *Client) ListBillingProjects(ctx context.Context) ([]BillingProject, error) {
	var out []BillingProject
	if err := c.Do(ctx, http.MethodGet, "/api/v1/billing-projects", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteBillingProject removes a billing project that never had a batch
// and that no queue names (admins; 409 otherwise, saying why).
func (c *Client) DeleteBillingProject(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/billing-projects/"+url.PathEscape(name), nil, nil)
}

// AddMember adds a user to a billing project.
func (c *Client) AddMember(ctx context.Context, project, user string) error {
	return c.SetRole(ctx, project, user, "")
}

// SetRole adds a user to a billing project with a role (member, manager
// or viewer; "" is member), or changes its role.
func (c *Client) SetRole(ctx context.Context, project, user, role string) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/billing-projects/"+url.PathEscape(project)+"/members",
		&MemberRequest{User: user, Role: role}, nil)
}

// SetLogQuota sets a billing project's log quota in bytes (0: none).
func (c *Client) SetLogQuota(ctx context.Context, project string, bytes int64) (*BillingProject, error) {
	var out BillingProject
	if err := c.Do(ctx, http.MethodPut, "/api/v1/billing-projects/"+url.PathEscape(project)+"/log-quota", &LogQuotaRequest{Bytes: bytes}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetSpendLimit sets a billing project's spend limit in dollars (0: none).
func (c *Client) SetSpendLimit(ctx context.Context, project string, limit money.Amount) (*BillingProject, error) {
	var out BillingProject
	if err := c.Do(ctx, http.MethodPut, "/api/v1/billing-projects/"+url.PathEscape(project)+"/spend-limit", &SpendLimitRequest{Limit: limit}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetMaxPriority sets the highest priority a billing project's batches
// may ask (a manager's or an admin's call; the queue's max_priority still
// holds).
func (c *Client) SetMaxPriority(ctx context.Context, project string, max int64) (*BillingProject, error) {
	var out BillingProject
	if err := c.Do(ctx, http.MethodPut, "/api/v1/billing-projects/"+url.PathEscape(project)+"/max-priority", &MaxPriorityRequest{MaxPriority: max}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AddStoragePrefix gives a billing project a storage prefix (an admin's
// call), or replaces the credentials and settings of one it has; the
// answer lists the project's prefixes, without credentials.
func (c *Client) AddStoragePrefix(ctx context.Context, project string, req *AddStoragePrefixRequest) ([]StoragePrefix, error) {
	var out []StoragePrefix
	if err := c.Do(ctx, http.MethodPost, "/api/v1/billing-projects/"+url.PathEscape(project)+"/storage", req, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveStoragePrefix takes a storage prefix from a billing project (an
// admin's call): attempts that start afterwards may not use it.
func (c *Client) RemoveStoragePrefix(ctx context.Context, project, prefix string) ([]StoragePrefix, error) {
	var out []StoragePrefix
	path := "/api/v1/billing-projects/" + url.PathEscape(project) + "/storage?" + url.Values{"prefix": {prefix}}.Encode()
	if err := c.Do(ctx, http.MethodDelete, path, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListStoragePrefixes lists a billing project's storage prefixes (for its
// members and admins), without credentials.
func (c *Client) ListStoragePrefixes(ctx context.Context, project string) ([]StoragePrefix, error) {
	var out []StoragePrefix
	if err := c.Do(ctx, http.MethodGet, "/api/v1/billing-projects/"+url.PathEscape(project)+"/storage", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SetBillingProjectSettings changes an admin's settings of a billing
// project (see BillingProjectSettings).
func (c *Client) SetBillingProjectSettings(ctx context.Context, project string, req *BillingProjectSettings) (*BillingProject, error) {
	var out BillingProject
	if err := c.Do(ctx, http.MethodPut, "/api/v1/billing-projects/"+url.PathEscape(project)+"/settings", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CostQuery asks for a billing project's cost report: the UTC days
// From..To ("2026-11-24"; empty: the last 30 days), grouped By day (the
// default), user or batch, listing at most Limit users or batches (0: the
// server's default).
type CostQuery struct {
	From, To string
	By       string
	Limit    int
}

// ProjectCost reports a billing project's cost.
func (c *Client) ProjectCost(ctx context.Context, project string, cq CostQuery) (*ProjectCost, error) {
	q := url.Values{}
	for k, v := range map[string]string{"from": cq.From, "to": cq.To, "by": cq.By} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if cq.Limit != 0 {
		q.Set("limit", strconv.Itoa(cq.Limit))
	}
	var out ProjectCost
	if err := c.Do(ctx, http.MethodGet, "/api/v1/billing-projects/"+url.PathEscape(project)+"/cost?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateToken makes a token (see CreateTokenRequest); the answer carries
// it, the only time it is shown.
func (c *Client) CreateToken(ctx context.Context, req *CreateTokenRequest) (*Token, error) {
	r := *req
	if r.Token == "" {
		r.Token = NewToken() // a retry is recognised by it
	}
	var out Token
	if err := c.Do(ctx, http.MethodPost, "/api/v1/tokens", &r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens lists the caller's tokens, another user's (admins), or
// everyone's (all, admins).
func (c *Client) ListTokens(ctx context.Context, user string, all bool) ([]Token, error) {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	if all {
		q.Set("all", "true")
	}
	var out []Token
	if err := c.Do(ctx, http.MethodGet, "/api/v1/tokens?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeToken revokes a token by accessor.
func (c *Client) RevokeToken(ctx context.Context, accessor string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(accessor), nil, nil)
}

// RotateOwnToken replaces a token with a new one of the same name and
// lifetime; the old one stops working.
func (c *Client) RotateOwnToken(ctx context.Context, accessor string) (*Token, error) {
	var out Token
	if err := c.Do(ctx, http.MethodPost, "/api/v1/tokens/"+url.PathEscape(accessor)+"/rotate", &RotateTokenRequest{Token: NewToken()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rates lists the rates in force and to come (all: every version).
func (c *Client) Rates(ctx context.Context, all bool) ([]Rate, error) {
	path := "/api/v1/rates"
	if all {
		path += "?all=true"
	}
	var out []Rate
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SetRates adds rate versions (admins) and returns the rates now.
func (c *Client) SetRates(ctx context.Context, rates []NewRate) ([]Rate, error) {
	var out []Rate
	if err := c.Do(ctx, http.MethodPut, "/api/v1/rates", &SetRatesRequest{Rates: rates}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteUser deletes a user: its tokens stop working, its batches stay.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/users/"+url.PathEscape(name), nil, nil)
}

// Audit reads the audit log: entries since (a duration like 1h or an RFC
// 3339 time), of one user when user is set, newest first.
func (c *Client) Audit(ctx context.Context, since, user string, limit int) ([]AuditEntry, error) {
	return c.AuditPage(ctx, AuditQuery{Since: since, User: user, Limit: limit})
}

// AuditQuery asks for a page of the audit log.
type AuditQuery struct {
	// Since: a duration like 1h or an RFC 3339 time ("": the last 24
	// hours, or, with Before or After, as far back as the log reaches).
	Since string
	// Before and After (exclusive; zero: no bound) page through the log:
	// Before the entry at the end of a page read gives the page older
	// than it; After the one at its top, the page newer than it.
	Before, After time.Time
	User          string
	Limit         int // 0: the server's default (1,000)
}

// AuditPage reads a page of the audit log, newest first.
func (c *Client) AuditPage(ctx context.Context, a AuditQuery) ([]AuditEntry, error) {
	q := url.Values{}
	if a.Since != "" {
		q.Set("since", a.Since)
	}
	if !a.Before.IsZero() {
		q.Set("before", a.Before.UTC().Format(time.RFC3339Nano))
	}
	if !a.After.IsZero() {
		q.Set("after", a.After.UTC().Format(time.RFC3339Nano))
	}
	if a.User != "" {
		q.Set("user", a.User)
	}
	if a.Limit > 0 {
		q.Set("limit", strconv.Itoa(a.Limit))
	}
	var out []AuditEntry
	if err := c.Do(ctx, http.MethodGet, "/api/v1/audit?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveMember removes a user from a billing project.
func (c *Client) RemoveMember(ctx context.Context, project, user string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/billing-projects/"+url.PathEscape(project)+"/members/"+url.PathEscape(user), nil, nil)
}

// ListInstances lists worker instances, active and retired (admin only).
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	var out []Instance
	if err := c.Do(ctx, http.MethodGet, "/api/v1/instances", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Leader returns the leader status as seen by the server answering.
func (c *Client) Leader(ctx context.Context) (*LeaderStatus, error) {
	var out LeaderStatus
	if err := c.Do(ctx, http.MethodGet, "/api/v1/status/leader", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Worker protocol calls.

// Workers is the worker protocol (activation, syncs, deactivation, log
// chunks): what a worker, not a person, calls.
type Workers struct{ *Client }

// Workers is the client's worker protocol.
func (c *Client) Workers() Workers { return Workers{c} }

// Activate registers a worker and returns its instance token.
func (c Workers) Activate(ctx context.Context, req *ActivateRequest) (*ActivateResponse, error) {
	var out ActivateResponse
	if err := c.Do(ctx, http.MethodPost, "/api/v1/workers/activate", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sync sends a worker's report and returns the server's answer.
func (c Workers) Sync(ctx context.Context, req *SyncRequest) (*SyncResponse, error) {
	var out SyncResponse
	wait := time.Duration(req.WaitMillis) * time.Millisecond
	if err := c.doBulk(ctx, http.MethodPost, "/api/v1/workers/sync", req, &out, wait); err != nil {
		return nil, err
	}
	return &out, nil
}

// Deactivate tells the servers the worker is leaving; preempted says its
// machine is going away, so what it still runs is preempted, not lost.
func (c Workers) Deactivate(ctx context.Context, preempted bool) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/workers/deactivate", DeactivateRequest{Preempted: preempted}, nil)
}

// UploadLogChunk stores chunk seq of an attempt's log.
func (c Workers) UploadLogChunk(ctx context.Context, ref AttemptRef, seq int, data []byte) error {
	path := fmt.Sprintf("/api/v1/workers/logs/%d/%d/%d/%d", ref.BatchID, ref.JobID, ref.Attempt, seq)
	if data == nil {
		data = []byte{}
	}
	resp, err := c.send(ctx, http.MethodPut, path, "text/plain", data)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Operator calls.

// Operator is the operator's API of the servers themselves: Raft peers
// and leadership, snapshots, the gossip keyring, the history store's
// recheck and memory, as Nomad's api.Operator.
type Operator struct{ *Client }

// Operator is the client's operator API.
func (c *Client) Operator() Operator { return Operator{c} }

// Peers returns the Raft configuration as the answering server sees it.
// With stale, that server answers from its own view without asking the
// leader.
func (c Operator) Peers(ctx context.Context) (*Peers, error) {
	var out Peers
	if err := c.Do(ctx, http.MethodGet, "/api/v1/status/peers", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemovePeer removes a server from the Raft configuration; permanent
// keeps it out when it comes back (decommissions it).
func (c Operator) RemovePeer(ctx context.Context, id string, permanent bool) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/operator/raft/remove-peer", &RemovePeerRequest{ID: id, Permanent: permanent}, nil)
}

// ReadmitPeer takes a server off the decommissioned list: it may join
// again.
func (c Operator) ReadmitPeer(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/operator/raft/readmit", &RemovePeerRequest{ID: id}, nil)
}

// HistoryRecheck has every finished batch in memory checked against the
// history store again (and written to it if missing) before it may leave
// memory: after the store was restored from a backup.
func (c Operator) HistoryRecheck(ctx context.Context) (*HistoryRecheckResult, error) {
	var out HistoryRecheckResult
	if err := c.Do(ctx, http.MethodPost, "/api/v1/operator/history/recheck", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GossipKeyring lists the servers' gossip keys.
func (c Operator) GossipKeyring(ctx context.Context) (*GossipKeyring, error) {
	var out GossipKeyring
	if err := c.Do(ctx, http.MethodGet, "/api/v1/operator/gossip/keyring", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ChangeGossipKeyring installs, uses or removes a gossip key on every
// server and returns the keyring once the live servers hold it.
func (c Operator) ChangeGossipKeyring(ctx context.Context, op, key string) (*GossipKeyring, error) {
	var out GossipKeyring
	if err := c.Do(ctx, http.MethodPost, "/api/v1/operator/gossip/keyring", &GossipKeyringRequest{Op: op, Key: key}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TransferLeader hands leadership to another server (id "" for any).
//
// It is idempotent: it names the leader it saw first (From), so a retry
// after leadership moved under it moves nothing again, and it answers
// once a server other than From (or id) leads, as the servers say then.
func (c Operator) TransferLeader(ctx context.Context, id string) (*LeaderStatus, error) {
	before, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	if before.LeaderID == "" {
		return nil, fmt.Errorf("no server leads now; retry once one does")
	}
	if id != "" && before.LeaderID == id {
		return before, nil
	}
	var out LeaderStatus
	if err := c.Do(ctx, http.MethodPost, "/api/v1/operator/raft/transfer-leader", &TransferLeaderRequest{ID: id, From: before.LeaderID}, &out); err != nil {
		return nil, err
	}
	// Report the leader the servers agree on, not the first one heard of.
	done := func(s *LeaderStatus) bool {
		return s.LeaderID != "" && s.LeaderID != before.LeaderID && (id == "" || s.LeaderID == id)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := c.Leader(ctx)
		if err == nil && done(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("leadership was handed over, but %s leads now (it was %s)", st.LeaderID, before.LeaderID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SnapshotSave writes a snapshot of the whole state to w.
func (c Operator) SnapshotSave(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, "/api/v1/operator/snapshot", "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// SnapshotRestore replaces the cluster's state with a saved snapshot.
func (c Operator) SnapshotRestore(ctx context.Context, data []byte) (*RestoreResult, error) {
	resp, err := c.send(ctx, http.MethodPut, "/api/v1/operator/snapshot", "application/octet-stream", data)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out RestoreResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("the restore's answer: %w", err)
	}
	return &out, nil
}

// Memory collects garbage on the server answering and returns its heap
// (admin only; answered by the server asked, not the leader).
func (c Operator) Memory(ctx context.Context) (*MemoryStats, error) {
	var out MemoryStats
	if err := c.Do(ctx, http.MethodGet, "/api/v1/operator/memory", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobWhy says why a job is where it is.
func (c *Client) JobWhy(ctx context.Context, batchID, jobID int64) (*JobWhy, error) {
	var out JobWhy
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/jobs/%d/why", batchID, jobID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRegions lists the regions with their clusters' totals.
func (c *Client) ListRegions(ctx context.Context) ([]Region, error) {
	var out []Region
	err := c.Do(ctx, http.MethodGet, "/api/v1/regions", nil, &out)
	return out, err
}

// ListClusters lists every cluster.
func (c *Client) ListClusters(ctx context.Context) ([]Cluster, error) {
	var out []Cluster
	err := c.Do(ctx, http.MethodGet, "/api/v1/clusters", nil, &out)
	return out, err
}

// AutoscalerStatus returns the autoscaler's settings, machines and last
// decision.
func (c *Client) AutoscalerStatus(ctx context.Context) (*AutoscalerStatus, error) {
	var out AutoscalerStatus
	err := c.Do(ctx, http.MethodGet, "/api/v1/autoscaler", nil, &out)
	return &out, err
}

// ListClusterGroups lists every cluster group with its clusters.
func (c *Client) ListClusterGroups(ctx context.Context) ([]ClusterGroup, error) {
	var out []ClusterGroup
	err := c.Do(ctx, http.MethodGet, "/api/v1/cluster-groups", nil, &out)
	return out, err
}

// GetCluster returns one cluster.
func (c *Client) GetCluster(ctx context.Context, name string) (*Cluster, error) {
	var out Cluster
	if err := c.Do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DisableCluster takes a cluster out of service (admin): no new attempt
// goes there from the commit on; with Evacuate its running attempts are
// preempted and run elsewhere.
func (c *Client) DisableCluster(ctx context.Context, name string, req *ClusterStateRequest) (*ClusterStateResponse, error) {
	var out ClusterStateResponse
	if err := c.Do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/disable", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnableCluster puts a cluster back in service (admin).
func (c *Client) EnableCluster(ctx context.Context, name string, req *ClusterStateRequest) (*ClusterStateResponse, error) {
	var out ClusterStateResponse
	if err := c.Do(ctx, http.MethodPost, "/api/v1/clusters/"+url.PathEscape(name)+"/enable", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// queuePath escapes each name of a queue's path for a URL.
func queuePath(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/api/v1/queues/" + strings.Join(parts, "/")
}

// ListQueues lists every queue, a parent before its children, with what
// it uses.
func (c *Client) ListQueues(ctx context.Context) ([]Queue, error) {
	var out []Queue
	err := c.Do(ctx, http.MethodGet, "/api/v1/queues", nil, &out)
	return out, err
}

// GetQueue returns one queue.
func (c *Client) GetQueue(ctx context.Context, path string) (*Queue, error) {
	var out Queue
	if err := c.Do(ctx, http.MethodGet, queuePath(path), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutQueue creates or replaces a queue (admin); its parent must exist.
func (c *Client) PutQueue(ctx context.Context, q *Queue) (*Queue, error) {
	var out Queue
	if err := c.Do(ctx, http.MethodPut, queuePath(q.Path), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RecommendQueues runs the percentile algorithm over the last days of
// recorded usage (percentile in percent, e.g. 95; days 0: the server's
// default, 30, or the days of usage it keeps when fewer).
func (c *Client) RecommendQueues(ctx context.Context, days int, percentile float64) (*QueueRecommendations, error) {
	var out QueueRecommendations
	q := url.Values{"percentile": {strconv.FormatFloat(percentile, 'f', -1, 64)}}
	if days != 0 {
		q.Set("days", strconv.Itoa(days))
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/queue-recommendations?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QueueSLO reports each workflow's, queue's and tier's SLO success and
// each queue's usage/capacity ratio over the last days (0: the server's
// default, as RecommendQueues); a workflow is SLO-successful from
// threshold (0: the server's default, 0.9).
func (c *Client) QueueSLO(ctx context.Context, days int, threshold float64) (*QueueSLOReport, error) {
	var out QueueSLOReport
	q := url.Values{}
	if days != 0 {
		q.Set("days", strconv.Itoa(days))
	}
	if threshold != 0 {
		q.Set("threshold", strconv.FormatFloat(threshold, 'f', -1, 64))
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/queue-slo?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QueueHistory lists the versions kept of a tree's settings ("": every
// tree's).
func (c *Client) QueueHistory(ctx context.Context, tree string) (*QueueHistory, error) {
	var out QueueHistory
	if err := c.Do(ctx, http.MethodGet, "/api/v1/queue-history?"+url.Values{"tree": {tree}}.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QueueReport reports each cluster's capacity and what each tier and leaf
// queue used of it over the last days (0: the server's default).
func (c *Client) QueueReport(ctx context.Context, days int) (*QueueReport, error) {
	var out QueueReport
	q := url.Values{"by": {"cluster"}}
	if days != 0 {
		q.Set("days", strconv.Itoa(days))
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/queue-report?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RebalanceQueues proposes the moves of leaf queues between clusters
// that bring the clusters above high usage/capacity down (apply: makes
// them, admin).
func (c *Client) RebalanceQueues(ctx context.Context, req *QueueRebalanceRequest, apply bool) (*QueueRebalance, error) {
	var out QueueRebalance
	if apply {
		if err := c.Do(ctx, http.MethodPost, "/api/v1/queue-rebalance", req, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	q := url.Values{}
	for k, v := range map[string]string{"days": strconv.Itoa(req.Days), "max_moves": strconv.Itoa(req.MaxMoves),
		"high": strconv.FormatFloat(req.High, 'f', -1, 64), "low": strconv.FormatFloat(req.Low, 'f', -1, 64)} {
		if v != "0" {
			q.Set(k, v)
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/queue-rebalance?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AutoApplyQueues regenerates a tree's settings now (admin).
func (c *Client) AutoApplyQueues(ctx context.Context, req *QueueAutoApplyRequest) (*QueueVersion, error) {
	var out QueueVersion
	if err := c.Do(ctx, http.MethodPost, "/api/v1/queue-auto-apply", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RollbackQueues puts back a tree's settings from before a version
// (admin).
func (c *Client) RollbackQueues(ctx context.Context, req *QueueRollbackRequest) (*QueueVersion, error) {
	var out QueueVersion
	if err := c.Do(ctx, http.MethodPost, "/api/v1/queue-rollback", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQueue removes a queue without children (admin).
func (c *Client) DeleteQueue(ctx context.Context, path string) error {
	return c.Do(ctx, http.MethodDelete, queuePath(path), nil, nil)
}

// DeleteCluster removes a declared cluster (refused while it has active
// workers, machines, launch configs or queues routed to it).
func (c *Client) DeleteCluster(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/clusters/"+url.PathEscape(name), nil, nil)
}

// DeleteClusterGroup removes a cluster group with no cluster in it.
func (c *Client) DeleteClusterGroup(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/cluster-groups/"+url.PathEscape(name), nil, nil)
}

// DeleteLaunchConfig removes a launch config; the leader deletes its live
// machines.
func (c *Client) DeleteLaunchConfig(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/autoscaler/launch-configs/"+url.PathEscape(name), nil, nil)
}

// ApplyPlacement declares clusters, pools and queues (admin).
func (c *Client) ApplyPlacement(ctx context.Context, cfg *PlacementConfig) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/placement", cfg, nil)
}
