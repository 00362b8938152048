// Package units reads and prints the sizes and durations people type and
// read: "256MiB", "1.5GiB", "1.234s". It imports nothing of drover's.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

var byteUnits = map[string]float64{
	"b":   1,
	"k":   1e3,
	"kb":  1e3,
	"kib": 1 << 10,
	"m":   1e6,
	"mb":  1e6,
	"mib": 1 << 20,
	"g":   1e9,
	"gb":  1e9,
	"gib": 1 << 30,
	"t":   1e12,
	"tb":  1e12,
	"tib": 1 << 40,
}

// ParseBytes reads a size such as "256MiB", "1.5GiB" or "2GB" (decimal and
// binary units, case-insensitive). A bare number is refused: whether 512
// meant bytes or megabytes is exactly the kind of guess that wastes a day.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(unicode.IsDigit(r) || r == '.') })
	if i == 0 || s == "" {
		return 0, fmt.Errorf("size %q must start with a number, as in \"512MiB\"", s)
	}
	if i < 0 {
		return 0, fmt.Errorf("size %q has no unit: write \"%sMiB\" or \"%sGiB\"", s, s, s)
	}
	num, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, s[:i])
	}
	unit := strings.TrimSpace(s[i:])
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("size %q has an unknown unit %q: use B, KiB, MiB, GiB, TiB (binary) or KB, MB, GB, TB (decimal)", s, unit)
	}
	v := num * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(v)), nil
}

// FormatBytes prints a size with the largest binary unit that keeps it at or
// above 1.
func FormatBytes(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size {
			v := float64(n) / float64(u.size)
			if v == math.Trunc(v) {
				return fmt.Sprintf("%d%s", int64(v), u.name)
			}
			return fmt.Sprintf("%.1f%s", v, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// RoundDuration keeps three significant digits or so: 1.234s, 12ms, 250µs.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
