// Package s3fake is an S3 store in memory for tests (gofakes3), behind a
// check of every request's AWS Signature Version 4 against the keys it is
// given, each allowed some bucket prefixes: drover's S3 access is tested
// through gocloud's s3blob and aws-sdk-go-v2 exactly as in production,
// with keys a store really checks.
package s3fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running fake S3 store.
type Server struct {
	// URL is its endpoint (path-style: URL/BUCKET/KEY).
	URL string

	srv     *httptest.Server
	backend *s3mem.Backend
	s3      http.Handler

	mu       sync.Mutex
	keys     map[string]Key
	requests []Request
}

// Key is an access key the store accepts, for objects under Prefixes
// ("bucket/dir", "bucket": the whole bucket).
type Key struct {
	ID, Secret string
	Prefixes   []string
}

// Request is a request the store saw: who signed it (the access key ID;
// empty: unsigned), what it asked, and whether it was let through.
type Request struct {
	KeyID   string
	Method  string
	Path    string
	Status  int
	Refusal string
}

// Start starts a store with these keys and buckets (made empty).
func Start(keys []Key, buckets ...string) (*Server, error) {
	s := &Server{backend: s3mem.New(), keys: map[string]Key{}}
	for _, k := range keys {
		s.keys[k.ID] = k
	}
	for _, b := range buckets {
		if err := s.backend.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	s.s3 = gofakes3.New(s.backend, gofakes3.WithoutVersioning()).Server()
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the store.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Put stores an object directly (test setup).
func (s *Server) Put(bucket, key string, data []byte) error {
	_, err := s.backend.PutObject(bucket, key, map[string]string{}, strings.NewReader(string(data)), int64(len(data)), nil)
	return err
}

// Get reads an object directly (test checks).
func (s *Server) Get(bucket, key string) ([]byte, error) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer obj.Contents.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := obj.Contents.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(b.String()), nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	keyID, why := s.check(r)
	rec := Request{KeyID: keyID, Method: r.Method, Path: r.URL.Path}
	if why != "" {
		rec.Status, rec.Refusal = http.StatusForbidden, why
		s.record(rec)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message></Error>`, xmlEscape(why))
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	s.s3.ServeHTTP(sw, r)
	rec.Status = sw.code
	s.record(rec)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

// check verifies a request's signature and that its key may reach the
// object it names; it returns the key ID and, when refused, why.
func (s *Server) check(r *http.Request) (keyID, why string) {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return "", "request is not signed with AWS Signature Version 4"
	}
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 {
		return "", "malformed credential scope"
	}
	keyID, region := scope[0], scope[2]
	s.mu.Lock()
	key, ok := s.keys[keyID]
	s.mu.Unlock()
	if !ok {
		return keyID, "unknown access key " + keyID
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return keyID, "no X-Amz-Date"
	}
	// Sign a copy of the request holding only the headers the client
	// signed, with the key's secret: the signatures must be the same.
	cp, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	cp.Host = r.Host
	cp.URL.RawPath = r.URL.RawPath
	cp.ContentLength = r.ContentLength
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			cp.Header.Add(h, v)
		}
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		sum := sha256.Sum256(nil)
		payload = hex.EncodeToString(sum[:])
	}
	creds := aws.Credentials{AccessKeyID: keyID, SecretAccessKey: key.Secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), creds, cp, payload, "s3", region, when); err != nil {
		return keyID, "cannot check the signature: " + err.Error()
	}
	want := cp.Header.Get("Authorization")
	if i := strings.Index(want, "Signature="); i < 0 || want[i+len("Signature="):] != fields["Signature"] {
		return keyID, "signature does not match (wrong secret for " + keyID + ")"
	}
	// The object (or listing prefix) must lie under one of the key's
	// prefixes.
	path := strings.TrimPrefix(r.URL.Path, "/")
	if p := r.URL.Query().Get("prefix"); p != "" && !strings.Contains(path, "/") {
		path += "/" + p
	}
	for _, p := range key.Prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return keyID, ""
		}
	}
	return keyID, fmt.Sprintf("key %s may not reach %s", keyID, path)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
