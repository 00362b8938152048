package worker

import "testing"

func TestDefaultMemory(t *testing.T) {
	for _, c := range []struct {
		cores float64
		want  int64
	}{{1, 2 << 30}, {0.5, 1 << 30}, {64, 128 << 30}, {1.5, 3 << 30}} {
		if got := DefaultMemory(c.cores); got != c.want {
			t.Errorf("DefaultMemory(%g) = %d, want %d", c.cores, got, c.want)
		}
	}
}
