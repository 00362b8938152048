package sim

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestQueueScenarios runs every scenario of testdata/queues through the
// real state machine and the leader's scheduling and preemption rounds,
// and checks what each expects: weighted shares within 5% once queues
// are saturated, tier-1 waits bounded while tier 3 floods, a borrower's
// attempts reclaimed in another region within the owner's reclaim grace
// and a round, no preemption cycles, no starvation, priorities respected.
func TestQueueScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/queues/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("scenarios: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			sc, err := ReadQueueScenario(f)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.Check = testing.Short()
			res, err := RunQueues(context.Background(), sc, opts, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(res)
			t.Logf("%s", out)
			if err := sc.Check(res); err != nil {
				t.Fatal(err)
			}
		})
	}
}
