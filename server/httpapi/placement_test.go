package httpapi

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestTeamIsCheckedBeforeTheLog: a team with an unknown strategy (or a bad
// GPU type) is refused by the API, naming the problem, before any command
// is made of it.
func TestTeamIsCheckedBeforeTheLog(t *testing.T) {
	for _, c := range []struct {
		team api.Team
		want string
	}{
		{api.Team{Name: "t", Strategy: strings.Repeat("x", 1<<20)}, "unknown placement strategy"},
		{api.Team{Name: "t", Quota: api.Quota{GPUs: map[string]int{"a 100": 1}}}, "use letters, digits"},
		{api.Team{Name: "bad name"}, "use letters, digits"},
	} {
		if _, err := teamFromAPI(c.team); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("team %.40q: %v, want an error with %q", c.team.Name+c.team.Strategy, err, c.want)
		}
	}
	if _, err := teamFromAPI(api.Team{Name: "ok", Strategy: "pack", BillingProjects: []string{"p"}, Quota: api.Quota{CPU: 8}}); err != nil {
		t.Fatalf("a good team: %v", err)
	}
}
