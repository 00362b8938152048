package why

import (
	"strings"
	"time"
)

// DisabledClusters words disabled clusters for a waiting reason:
// "clusters a, b disabled", or for one, Disabled with its record
// (found by find; not found: "cluster a disabled"). The leader's waiting
// reasons and job why both print it.
func DisabledClusters(names []string, find func(name string) (reason, by string, since int64, ok bool)) string {
	if len(names) != 1 {
		return "clusters " + strings.Join(names, ", ") + " disabled"
	}
	if reason, by, since, ok := find(names[0]); ok {
		return "cluster " + Disabled(names[0], reason, by, since)
	}
	return "cluster " + names[0] + " disabled"
}

// Disabled says why, since when and by whom a cluster is
// disabled: "us-west1-b disabled (maintenance, since 10:02 UTC, by ops)".
func Disabled(name, reason, by string, since int64) string {
	var parts []string
	if reason != "" {
		parts = append(parts, reason)
	}
	if since != 0 {
		parts = append(parts, "since "+time.Unix(0, since).UTC().Format("2006-01-02 15:04 UTC"))
	}
	if by != "" {
		parts = append(parts, "by "+by)
	}
	if len(parts) == 0 {
		return name + " disabled"
	}
	return name + " disabled (" + strings.Join(parts, ", ") + ")"
}
