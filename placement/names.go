package placement

import "fmt"

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
