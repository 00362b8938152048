package api

import (
	"fmt"
	"net/url"
	"strings"
)

// MaxCallbackBytes bounds a batch's callback URL.
const MaxCallbackBytes = 2048

// ParseCallback checks a batch's callback URL (or an allowed destination
// of callbacks) as a URL: http or https, a host, no user or password, no
// fragment, at most MaxCallbackBytes.
func ParseCallback(what, raw string) (*url.URL, error) {
	if len(raw) > MaxCallbackBytes {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", what, len(raw), MaxCallbackBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %.100q is not a URL: %v", what, raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s %.100q: use an http or https URL", what, raw)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("%s %.100q names no host", what, raw)
	case u.User != nil:
		return nil, fmt.Errorf("%s %.100q carries a user or password: put credentials in the receiver's own configuration, not in the URL", what, u.Redacted())
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%s %.100q has a fragment", what, raw)
	}
	// A receiver may resolve "." and ".." (escaped or not) out of the
	// prefix an admin allowed.
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, fmt.Errorf("%s %.100q has a %q path segment", what, raw, seg)
		}
	}
	return u, nil
}

// CallbackAllowed is the one rule of where a completion callback may go:
// its scheme and host (with the port) those of a destination an admin
// allowed, and its path under that destination's. The API checks a
// batch's callback with it, and the leader again before every POST. allow
// holds URLs ParseCallback accepted; none allows nothing.
func CallbackAllowed(u *url.URL, allow []*url.URL) bool {
	for _, a := range allow {
		if u.Scheme != a.Scheme || !strings.EqualFold(u.Host, a.Host) {
			continue
		}
		prefix, p := strings.TrimSuffix(a.EscapedPath(), "/"), u.EscapedPath()
		if prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// ParseCallbackAllow parses the destinations an admin allows callbacks to.
func ParseCallbackAllow(raws []string) ([]*url.URL, error) {
	out := make([]*url.URL, 0, len(raws))
	for _, r := range raws {
		u, err := ParseCallback("allowed callback destination", r)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
