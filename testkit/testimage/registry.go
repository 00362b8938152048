package testimage

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Kind is what a registry request was about.
type Kind int

const (
	// KindOther is the API version check (/v2/) and anything else.
	KindOther Kind = iota
	// KindManifest is a manifest or index (/v2/REPO/manifests/REF).
	KindManifest
	// KindBlob is a layer or config blob, or a blob upload
	// (/v2/REPO/blobs/...).
	KindBlob
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindManifest:
		return "manifest"
	case KindBlob:
		return "blob"
	}
	return "other"
}

// Request is one request the registry served.
type Request struct {
	Method string
	Kind   Kind
	// Repo and Ref are from the path: "team/app" and the tag or digest
	// (for uploads, Ref is "uploads").
	Repo, Ref string
	UserAgent string
	Status    int
}

// RegistryConfig configures NewRegistry.
type RegistryConfig struct {
	// Username and Password, when set, are required (HTTP basic auth) on
	// every request, as a private registry would.
	Username, Password string
}

// Registry is go-containerregistry's in-process registry on a loopback
// port, recording every request.
type Registry struct {
	// Host is the registry's host:port, the first part of references.
	Host string

	cfg RegistryConfig
	srv *httptest.Server

	mu   sync.Mutex
	reqs []*Request
}

// NewRegistry starts a registry on 127.0.0.1 (plain HTTP, which
// go-containerregistry uses for loopback hosts without being told).
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start registry: %w", err)
	}
	r := &Registry{cfg: cfg}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewUnstartedServer(r.handler(inner))
	r.srv.Listener.Close()
	r.srv.Listener = l
	r.srv.Start()
	r.Host = l.Addr().String()
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

// Ref returns the reference of repoTag ("app:v1", "app@sha256:...") in
// this registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// Requests returns the requests served so far, oldest first.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Request, len(r.reqs))
	for i, q := range r.reqs {
		out[i] = *q
	}
	return out
}

// Count returns how many requests served so far match.
func (r *Registry) Count(match func(Request) bool) int {
	n := 0
	for _, q := range r.Requests() {
		if match(q) {
			n++
		}
	}
	return n
}

// Reset forgets the requests served so far (say, the pushes that set the
// test up).
func (r *Registry) Reset() {
	r.mu.Lock()
	r.reqs = nil
	r.mu.Unlock()
}

// Push writes img to repoTag in this registry, with its credentials, and
// returns the full reference.
func (r *Registry) Push(img v1.Image, repoTag string) (string, error) {
	ref := r.Ref(repoTag)
	return ref, push(img, ref, nil, remote.WithAuth(r.auth()))
}

// PushIndex writes idx and its images to repoTag, like Push.
func (r *Registry) PushIndex(idx v1.ImageIndex, repoTag string) (string, error) {
	ref := r.Ref(repoTag)
	return ref, push(idx, ref, nil, remote.WithAuth(r.auth()))
}

func (r *Registry) auth() authn.Authenticator {
	if r.cfg.Username == "" {
		return authn.Anonymous
	}
	return &authn.Basic{Username: r.cfg.Username, Password: r.cfg.Password}
}

func (r *Registry) handler(inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Recorded before the response goes out: a client that has its
		// answer must find its request counted.
		q := classify(req)
		q.Status = http.StatusOK
		r.mu.Lock()
		r.reqs = append(r.reqs, q)
		r.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, r: r, q: q}
		if r.cfg.Username != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.cfg.Username || p != r.cfg.Password {
				sw.Header().Set("WWW-Authenticate", `Basic realm="testimage"`)
				sw.Header().Set("Content-Type", "application/json")
				sw.WriteHeader(http.StatusUnauthorized)
				io.WriteString(sw, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		inner.ServeHTTP(sw, req)
	})
}

// classify reads a request's kind, repository and reference from its path.
func classify(req *http.Request) *Request {
	q := &Request{Method: req.Method, UserAgent: req.UserAgent()}
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	if i := strings.LastIndex(p, "/manifests/"); i >= 0 {
		q.Kind, q.Repo, q.Ref = KindManifest, p[:i], p[i+len("/manifests/"):]
	} else if i := strings.LastIndex(p, "/blobs/"); i >= 0 {
		q.Kind, q.Repo, q.Ref = KindBlob, p[:i], p[i+len("/blobs/"):]
		if strings.HasPrefix(q.Ref, "uploads") {
			q.Ref = "uploads"
		}
	}
	return q
}

// statusWriter records a response's status in its request's record
// before sending it.
type statusWriter struct {
	http.ResponseWriter
	r *Registry
	q *Request
}

func (w *statusWriter) WriteHeader(code int) {
	w.r.mu.Lock()
	w.q.Status = code
	w.r.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func encodeAuth(username, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(username + ":" + password))
}
