// Package faultnet puts a fault proxy (Shopify's toxiproxy, in process)
// on a TCP path for tests: latency and jitter, loss, and cuts in one
// direction or both, where this machine's kernel has no netem.
package faultnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Link is one proxied path: clients dial Addr, and reach upstream through
// whatever faults are on.
type Link struct {
	t     testing.TB
	proxy *toxiproxy.Proxy
	mu    sync.Mutex
	on    map[string]bool
}

// New starts a proxy to upstream on a loopback port of the kernel's
// choice (listen, when given, instead); it stops with the test.
func New(t testing.TB, upstream string, listen ...string) *Link {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	addr := "127.0.0.1:0"
	if len(listen) > 0 {
		addr = listen[0]
	}
	p := toxiproxy.NewProxy(srv, "link", addr, upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("faultnet: start a proxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Link{t: t, proxy: p, on: map[string]bool{}}
}

// Addr is where clients dial.
func (l *Link) Addr() string { return l.proxy.Listen }

// Direction of a fault: what the client sends (Up), what it gets (Down).
type Direction string

const (
	Up   Direction = "upstream"
	Down Direction = "downstream"
)

func (l *Link) add(name, kind string, d Direction, attrs map[string]any) {
	l.t.Helper()
	b, _ := json.Marshal(map[string]any{"name": name, "type": kind, "stream": string(d), "toxicity": 1.0, "attributes": attrs})
	if _, err := l.proxy.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		l.t.Fatalf("faultnet: add %s: %v", name, err)
	}
	l.mu.Lock()
	l.on[name] = true
	l.mu.Unlock()
}

// Cut drops everything in the given directions (both when none is
// given): connections stay open and data goes nowhere, as in a partition.
func (l *Link) Cut(dirs ...Direction) {
	if len(dirs) == 0 {
		dirs = []Direction{Up, Down}
	}
	for _, d := range dirs {
		l.add("cut-"+string(d), "timeout", d, map[string]any{"timeout": 0})
	}
}

// Latency delays each direction by ms, give or take jitter ms.
func (l *Link) Latency(ms, jitter int) {
	for _, d := range []Direction{Up, Down} {
		l.add("latency-"+string(d), "latency", d, map[string]any{"latency": ms, "jitter": jitter})
	}
}

// Heal removes every fault.
func (l *Link) Heal() {
	l.t.Helper()
	l.mu.Lock()
	names := make([]string, 0, len(l.on))
	for n := range l.on {
		names = append(names, n)
	}
	l.on = map[string]bool{}
	l.mu.Unlock()
	for _, n := range names {
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), n); err != nil {
			l.t.Fatalf("faultnet: remove %s: %v", n, err)
		}
	}
}

// String names the link.
func (l *Link) String() string { return fmt.Sprintf("%s -> %s", l.proxy.Listen, l.proxy.Upstream) }
