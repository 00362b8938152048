package placement

import (
	"strings"
	"testing"
)

func TestQueueTreeOrdersParentsBeforeChildren(t *testing.T) {
	tr, err := NewQueueTree([]Queue{
		{Path: "genomics/gwas/tier1", Weight: 3, Preemption: Preemption{AfterNs: 60e9}},
		{Path: "physics"},
		{Path: "genomics", Guarantee: Resources{CPUMilli: 100_000}},
		{Path: "genomics/gwas", Guarantee: Resources{CPUMilli: 60_000}},
		{Path: "genomics/gwas/tier3", Guarantee: Resources{CPUMilli: 20_000}, Preemption: Preemption{Preemptible: true}},
		{Path: "genomics/rna"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, q := range tr.Queues {
		order = append(order, q.Path)
	}
	want := "genomics genomics/gwas genomics/gwas/tier1 genomics/gwas/tier3 genomics/rna physics"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	gwas, _ := tr.Find("genomics/gwas")
	if tr.Parent[gwas] != 0 || len(tr.Children[gwas]) != 2 || tr.IsLeaf(gwas) {
		t.Fatalf("genomics/gwas: parent %d, children %v", tr.Parent[gwas], tr.Children[gwas])
	}
	t1, _ := tr.Find("genomics/gwas/tier1")
	if !tr.IsLeaf(t1) || !tr.Within(t1, "genomics") || tr.Within(t1, "genomics/gw") || tr.Queues[t1].Name() != "tier1" || tr.Queues[t1].EffectiveWeight() != 3 {
		t.Fatalf("tier1: %+v", tr.Queues[t1])
	}
	if len(tr.Top) != 2 || tr.Queues[tr.Top[1]].Path != "physics" || tr.Queues[tr.Top[1]].EffectiveWeight() != DefaultQueueWeight {
		t.Fatalf("top %v", tr.Top)
	}
}

func TestQueueTreeRefusesWhatCannotHold(t *testing.T) {
	big := Resources{CPUMilli: 10_000}
	for _, c := range []struct {
		name   string
		queues []Queue
		want   string
	}{
		{"no parent", []Queue{{Path: "a/b"}}, "queue a/b: its parent a is not declared"},
		{"twice", []Queue{{Path: "a"}, {Path: "a"}}, "queue a is declared twice"},
		{"bad name", []Queue{{Path: "a/b c"}}, `queue name in "a/b c"`},
		{"empty name", []Queue{{Path: "a//b"}}, "must be 1 to 64 characters"},
		{"too deep", []Queue{{Path: "a/b/c/d/e/f/g/h/i"}}, "queues nest at most 8 levels"},
		{"weight", []Queue{{Path: "a", Weight: -1}}, "queue a: weight -1 must be between 1 and 1000000"},
		{"guarantee", []Queue{{Path: "a", Guarantee: Resources{CPUMilli: -1}}}, "queue a: guarantee: cpu must be between 0 and 1000000000 cores"},
		{"borrow gpu", []Queue{{Path: "a", BorrowLimit: Limit{GPUs: map[string]int64{"h100": -2}}}}, "queue a: borrow_limit: h100 GPUs must be between 0 and 1000000000"},
		{"zero cap", []Queue{{Path: "a", BorrowLimit: Limit{CPUMilli: new(int64)}}}, "queue a: a borrow_limit of 0 cpu with no cpu guarantee would let it run nothing; guarantee it cores or leave cpu out of borrow_limit"},
		{"huge", []Queue{{Path: "a", Guarantee: Resources{CPUMilli: 2e12}}}, "queue a: guarantee: cpu must be between 0 and 1000000000 cores"},
		{"threshold", []Queue{{Path: "a", Preemption: Preemption{ThresholdPermille: 1500}}}, "preempt_threshold must be between 0 and 1"},
		{"duration", []Queue{{Path: "a", MinRuntimeNs: MaxQueueDuration + 1}}, "queue a: min_runtime must be a duration between 0s and 720h"},
		{"strategy", []Queue{{Path: "a", Strategy: "random"}}, `unknown placement strategy "random"`},
		{"children over parent", []Queue{{Path: "a", Guarantee: big}, {Path: "a/x", Guarantee: big}, {Path: "a/y", Guarantee: Resources{CPUMilli: 1}}},
			"queue a guarantees 10 cores but its children's guarantees add up to 10.001"},
		{"allow from unknown", []Queue{{Path: "a", Preemption: Preemption{AllowFrom: []string{"b"}}}}, "queue a: allow_preemption_from names b, which is not declared"},
	} {
		_, err := NewQueueTree(c.queues)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A parent that guarantees nothing of a resource bounds none of its
	// children's.
	if _, err := NewQueueTree([]Queue{{Path: "a"}, {Path: "a/x", Guarantee: big}, {Path: "a/y", Guarantee: big}}); err != nil {
		t.Fatal(err)
	}
}
