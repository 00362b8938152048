package apiview

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestPlacementConfigIsCheckedBeforeTheLog: cluster groups (their names,
// strategies and number) and a cluster's group name are checked by the
// API, naming the problem.
func TestPlacementConfigIsCheckedBeforeTheLog(t *testing.T) {
	many := make([]api.ClusterGroup, MaxPlacementItems+1)
	for i := range many {
		many[i].Name = "g"
	}
	for _, c := range []struct {
		cfg  api.PlacementConfig
		want string
	}{
		{api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "gpu", Strategy: strings.Repeat("x", 1<<20)}}}, "unknown placement strategy"},
		{api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "a b"}}}, "use letters, digits"},
		{api.PlacementConfig{Groups: many}, "at most 1000"},
		{api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r", Group: strings.Repeat("g", 200)}}}, "must be 1 to"},
	} {
		if _, err := PlacementFromAPI(&c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config: %v, want an error with %q", err, c.want)
		}
	}
	ok := api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "gpu", Strategy: "pack"}}, Clusters: []api.ClusterDecl{{Name: "a", Region: "r", Group: "gpu"}}}
	c, err := PlacementFromAPI(&ok)
	if err != nil || len(c.Groups) != 1 || c.Groups[0].Strategy != "pack" || c.Clusters[0].Group != "gpu" {
		t.Fatalf("a good config: %+v %v", c, err)
	}
}

// TestProviderSettingsAreCheckedBeforeTheLog: a cluster's provider and its
// settings are bounded by the API.
func TestProviderSettingsAreCheckedBeforeTheLog(t *testing.T) {
	many := map[string]string{}
	for i := 0; i < 40; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, c := range []struct {
		decl api.ClusterDecl
		want string
	}{
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "aws"}, "unknown provider"},
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "nomad", ProviderSettings: many}, "at most 32 provider settings"},
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "nomad", ProviderSettings: map[string]string{"address": strings.Repeat("x", 2000)}}, "at most 64 bytes and its value 1024"},
	} {
		if _, err := PlacementFromAPI(&api.PlacementConfig{Clusters: []api.ClusterDecl{c.decl}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.decl.Provider, err, c.want)
		}
	}
}
