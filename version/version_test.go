package version

import "testing"

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		v, rev   string
		modified bool
		want     string
	}{
		{"v1.4.0", "3f2a9c1d0e4b5a6978", true, "v1.4.0"},
		{"dev", "3f2a9c1d0e4b5a6978", false, "dev+3f2a9c1d0e4b"},
		{"dev", "3f2a9c1d0e4b5a6978", true, "dev+3f2a9c1d0e4b-dirty"},
		{"dev", "", false, "dev"},
	} {
		if got := describe(c.v, func() (string, bool) { return c.rev, c.modified }); got != c.want {
			t.Errorf("describe(%q, %q, %v) = %q, want %q", c.v, c.rev, c.modified, got, c.want)
		}
	}
}
