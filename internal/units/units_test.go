package units

import (
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int64{"256MiB": 256 << 20, "1.5GiB": 3 << 29, "2GB": 2e9, "1 kib": 1024, "10B": 10, "1TiB": 1 << 40}
	for in, want := range good {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "512", "GiB", "2GiGs", "1..5GiB", "-1GiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
	if s := FormatBytes(3 << 29); s != "1.5GiB" {
		t.Errorf("FormatBytes = %s", s)
	}
}

func TestRoundDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{1234567890: "1.235s", 12345678: "12.35ms", 250400: "250µs"} {
		if got := RoundDuration(in).String(); got != want {
			t.Errorf("RoundDuration(%d) = %s, want %s", in, got, want)
		}
	}
}
