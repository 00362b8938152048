package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"

	"github.com/drover-sched/drover/api"
)

// sloWindows are the windows the SLO page offers, in days.
var sloWindows = []int{1, 7, 30, 90}

// sloPage is each queue's and each tier's SLO record over a window:
// the runs that had an SLO, how many met it, the core-hours used and the
// usage against capacity (the history store's report, drover queue slo).
func (u *UI) sloPage(w http.ResponseWriter, r *http.Request, s *session) {
	days, _ := strconv.Atoi(r.URL.Query().Get("days"))
	if !slices.Contains(sloWindows, days) {
		days = 30
	}
	rep, err := s.client.QueueSLO(withRemote(r.Context(), r), days, 0)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	// The same window by cluster (a store that cannot say leaves the
	// section out, with why).
	byCluster, err := s.client.QueueReport(withRemote(r.Context(), r), days)
	clusterErr := ""
	if err != nil {
		byCluster, clusterErr = &api.QueueReport{}, err.Error()
	}
	u.render(w, r, s, http.StatusOK, "slo", map[string]any{"Title": "SLOs by queue and tier", "Report": rep, "Days": days, "Windows": sloWindows, "MaxRuns": api.MaxSLORuns,
		"ByCluster": byCluster, "ClusterErr": clusterErr})
}

func init() {
	funcs["dict"] = func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	}
	funcs["sloBar"] = sloBar
	funcs["percent"] = func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }
}

// sloBar draws the runs that met their SLO against those that missed it.
func sloBar(runs, met int64) template.HTML {
	if runs == 0 {
		return ""
	}
	return bar(120, 12, float64(runs), fmt.Sprintf("%d of %d runs met their SLO", met, runs),
		[]segment{{"st-success", fmt.Sprintf("%d met", met), float64(met)}, {"st-failed", fmt.Sprintf("%d missed", runs-met), float64(runs - met)}})
}
