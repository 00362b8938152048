package placementspec

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/server/apiview"
)

// TestAttack46MaxChangeZero: an operator writes max_change = 0 (as in
// "never move a setting", or by mistake). The diagnostic of a bad
// max_change says it "must be more than 0", but 0 is accepted and reads
// as the default, 0.25: each regeneration moves every setting up to a
// quarter. It should be refused (or mean no change), not silently be
// the default.
func TestAttack46MaxChangeZero(t *testing.T) {
	src := `queue "org" {
  auto_apply {
    every      = "24h"
    max_change = 0
  }
}`
	cfg, diags := Parse("q.hcl", []byte(src))
	if diags.HasErrors() {
		return // refused: the defence holds
	}
	q, err := apiview.QueueFromAPI(cfg.Queues[0])
	if err != nil {
		return
	}
	if step := q.AutoApply.Step(); step != 0 {
		t.Fatalf("max_change = 0 is accepted and steps %d/1000 of each setting per regeneration", step)
	}
}

// TestAttack46RecommendAndAutoApplyBounds: percentiles and max_change
// out of (0, 1], every out of 1s..90d, keep and days out of range, are
// refused by the parser or QueueFromAPI; tiny positive fractions do not
// round to 0 (the default).
func TestAttack46RecommendAndAutoApplyBounds(t *testing.T) {
	for _, body := range []string{
		"recommend { percentile = 0 }", "recommend { percentile = -0.5 }", "recommend { percentile = 1.0001 }", "recommend { percentile = 95 }",
		`auto_apply { every = "24h" max_change = -0.1 }`, `auto_apply { every = "24h" max_change = 1.5 }`,
		`auto_apply { every = "0s" }`, `auto_apply { every = "-1h" }`, `auto_apply { every = "91d" }`, `auto_apply { every = "100000000000h" }`,
		`auto_apply { every = "24h" keep = -1 }`, `auto_apply { every = "24h" keep = 101 }`,
		`auto_apply { every = "24h" days = -1 }`, `auto_apply { every = "24h" days = 366 }`,
		`auto_apply { every = "24h" days = 9223372036854775807 }`,
	} {
		src := "queue \"org\" {\n" + strings.ReplaceAll(body, " max_change", "\nmax_change") + "\n}"
		src = strings.NewReplacer("{ ", "{\n", " }", "\n}", `" keep`, "\"\nkeep", `" days`, "\"\ndays").Replace(src)
		cfg, diags := Parse("q.hcl", []byte(src))
		if diags.HasErrors() {
			continue
		}
		if _, err := apiview.QueueFromAPI(cfg.Queues[0]); err == nil {
			t.Errorf("accepted: %s", body)
		}
	}
	for body, want := range map[string]int64{
		"recommend {\npercentile = 0.0001\n}":                   1,
		"auto_apply {\nevery = \"24h\"\nmax_change = 0.0001\n}": 1,
	} {
		cfg, diags := Parse("q.hcl", []byte("queue \"org\" {\n"+body+"\n}"))
		if diags.HasErrors() {
			t.Fatalf("%s: %v", body, diags)
		}
		q, err := apiview.QueueFromAPI(cfg.Queues[0])
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := max(q.RecommendPermille, q.AutoApply.MaxChangePermille); got != want {
			t.Errorf("%s: %d thousandths, want %d", body, got, want)
		}
	}
}
