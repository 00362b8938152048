package placement

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxName bounds a region, cluster, pool, queue or GPU type name.
const MaxName = 64

// ValidateName is the one rule of the names of places (a region,
// cluster, pool, queue or GPU type): 1 to MaxName letters, digits, '-',
// '_' or '.'. The API checks a request with it (api.ValidatePlaceName)
// and apply checks the command again.
func ValidateName(what, s string) error {
	if s == "" || len(s) > MaxName {
		return fmt.Errorf("%s %.70q must be 1 to %d characters", what, s, MaxName)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%s %q: use letters, digits, '-', '_' and '.'", what, s)
		}
	}
	return nil
}

// Bounds of the worker labels a job may ask for.
const (
	MaxJobLabels    = 16
	MaxLabelKey     = 63
	MaxLabelValue   = 255
	MaxLabelsLength = 1024 // the keys and values of one job's labels together
)

// ValidateLabels checks the worker labels a job asks for: at most
// MaxJobLabels, each key 1 to MaxLabelKey letters, digits, '-', '_', '.'
// and '/', each value at most MaxLabelValue bytes of printable UTF-8,
// MaxLabelsLength bytes in all.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxJobLabels {
		return fmt.Errorf("%d labels; a job may ask for at most %d", len(labels), MaxJobLabels)
	}
	total := 0
	for k, v := range labels {
		if k == "" || len(k) > MaxLabelKey {
			return fmt.Errorf("label key %.70q must be 1 to %d characters", k, MaxLabelKey)
		}
		for _, r := range k {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '/') {
				return fmt.Errorf("label key %.70q: use letters, digits, '-', '_', '.' and '/'", k)
			}
		}
		if len(v) > MaxLabelValue {
			return fmt.Errorf("label %s's value is %d bytes; the limit is %d", k, len(v), MaxLabelValue)
		}
		if !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
			return fmt.Errorf("label %s's value %.70q: use printable characters", k, v)
		}
		total += len(k) + len(v)
	}
	if total > MaxLabelsLength {
		return fmt.Errorf("labels of %d bytes; the limit is %d", total, MaxLabelsLength)
	}
	return nil
}

// Bounds of job group paths (a batch's nested job groups).
const (
	MaxJobGroupDepth   = 8   // nesting under the batch
	MaxJobGroupPath    = 512 // bytes of a path
	MaxJobGroupSegment = 128 // bytes of one name in it
)

// ValidateJobGroupPath is the one rule of a job group's path: names of 1
// to MaxJobGroupSegment letters, digits, '-', '_' and '.' (not "." or
// ".."), joined by '/', at most MaxJobGroupDepth deep and
// MaxJobGroupPath bytes. The API checks a request with it and apply
// checks the command again.
func ValidateJobGroupPath(path string) error {
	if path == "" {
		return fmt.Errorf("a job group needs a path (its name, after its parents' joined by '/')")
	}
	if len(path) > MaxJobGroupPath {
		return fmt.Errorf("job group path of %d bytes; at most %d", len(path), MaxJobGroupPath)
	}
	if strings.Trim(path, "0123456789") == "" {
		return fmt.Errorf("job group %q: a path of digits alone would read as a group's ID; add a letter", path)
	}
	segs := strings.Split(path, "/")
	if len(segs) > MaxJobGroupDepth {
		return fmt.Errorf("job group %q is nested %d deep; at most %d", path, len(segs), MaxJobGroupDepth)
	}
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." || len(seg) > MaxJobGroupSegment {
			return fmt.Errorf("job group %q: each name is 1 to %d bytes, and neither \".\" nor \"..\"", path, MaxJobGroupSegment)
		}
		for _, r := range seg {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				return fmt.Errorf("job group %q: names take letters, digits, '-', '_' and '.', not %q", path, r)
			}
		}
	}
	return nil
}
