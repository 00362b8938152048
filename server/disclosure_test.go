package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/httpapi"
)

// TestPublicEndpointsNameNoRaftAddress: what anyone may read (every Public
// route of httpapi.Routes) names no Raft or gossip address, term or index;
// the metrics behind a token still carry the term and indexes.
func TestPublicEndpointsNameNoRaftAddress(t *testing.T) {
	keyText, _ := cluster.GenerateGossipKey()
	key, _ := cluster.ParseGossipKey(keyText)
	tc := startServer(t, "", func(cfg *Config) {
		cfg.Bootstrap, cfg.BootstrapExpect, cfg.GossipAddr, cfg.GossipKeys = false, 1, "127.0.0.1:0", [][]byte{key}
	})
	secrets := []string{tc.srv.RaftAddr(), tc.srv.GossipAddr(), "drover_raft_term", "drover_raft_last_index", "drover_raft_commit_index",
		"drover_raft_applied_index", `"term"`, `"index"`, `"leader"`, "raft address"}
	get := func(path, tok string) string {
		req, _ := http.NewRequest(http.MethodGet, tc.url+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	public := 0
	for _, rt := range tc.srv.api.Routes() {
		if rt.Access != httpapi.Public {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		if method != http.MethodGet || strings.Contains(path, "{") {
			t.Fatalf("public route %s: the test knows only GETs without parameters", rt.Pattern)
		}
		public++
		body := get(path, "")
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s tells anyone %q:\n%.2000s", rt.Pattern, s, body)
			}
		}
	}
	if public < 2 {
		t.Fatalf("%d public routes; health and metrics at least", public)
	}
	tc.stop()

	tc = startServer(t, "", func(cfg *Config) { cfg.MetricsToken = "scrape-secret" })
	body := get("/metrics", "scrape-secret")
	for _, want := range []string{"drover_raft_term", "drover_raft_last_index", "drover_raft_commit_index", "drover_raft_applied_index"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics behind the token lack %s", want)
		}
	}
}
