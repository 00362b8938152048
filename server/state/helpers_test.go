package state

import "testing"

func newHarness(t *testing.T) *Harness { return NewHarness(t, nil) }

func spec(name string, cpu float64) *Spec {
	return &Spec{Name: name, Command: []string{"true"}, CPUMilli: int64(cpu * 1000), Memory: 1 << 30}
}

func entry(first, count uint32, s *Spec, parents ...Range) JobEntry {
	return JobEntry{First: first, Count: count, Spec: s, Parents: parents}
}

func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
