// Package version says which drover this binary is: the release a build
// names with -ldflags "-X github.com/drover-sched/drover/version.Version=v1.4.0"
// (make build sets it from git describe), else "dev" with the commit Go
// recorded when it built from a checkout. Servers tell each other theirs
// over gossip, so a mixed fleet during an upgrade can be seen.
package version

import (
	"runtime/debug"
	"sync"
)

// Version is set at build time; "dev" when it was not.
var Version = "dev"

var (
	once   sync.Once
	cached string
)

// Get is the version: Version, and for a dev build the commit it was
// built from ("dev+3f2a9c1d0e4b", "-dirty" with uncommitted changes).
func Get() string {
	once.Do(func() { cached = describe(Version, readVCS) })
	return cached
}

func readVCS() (rev string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}

// describe is Get's rule, with the build's record read by vcs.
func describe(v string, vcs func() (string, bool)) string {
	if v != "dev" {
		return v
	}
	rev, modified := vcs()
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v += "+" + rev
	if modified {
		v += "-dirty"
	}
	return v
}
