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
// fragment, at most MaxCallbackBytes, and a path every receiver reads the
// same way (callbackPathProblem). The API checks a batch's callback with
// it, and the leader again before every POST, each time before
// CallbackAllowed: it refuses rather than rewrites, so the URL POSTed is
// the one the tenant gave and the one the allow-list check saw.
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
	if problem := callbackPathProblem(u); problem != "" {
		return nil, fmt.Errorf("%s %.100q %s", what, raw, problem)
	}
	return u, nil
}

// callbackPathProblem says what in u's path a receiver might resolve to
// another path than the one the allow-list check compares (CallbackAllowed
// compares the path as written, segment by segment under an allowed
// prefix), or "" when nothing:
//
//   - a "." or ".." segment, written plainly or percent-encoded: a
//     receiver resolves it out of the allowed prefix;
//   - a ";" (or %3B): Tomcat and other servlet containers strip path
//     parameters from each segment, so "/hooks/..;/admin" reaches "/admin";
//   - a backslash (or %5C): IIS, some proxies and Windows-hosted receivers
//     read it as "/" (and so "\..\" as a "..");
//   - an encoded "/" (%2F), "." (%2E) or "%" (%25, an escape escaped again):
//     receivers decode them in different places, before or after they
//     split the path or resolve dot segments;
//   - an empty segment ("//" inside the path; a trailing "/" is fine):
//     some receivers collapse it and some do not, so the path the check
//     saw is not the one they serve;
//   - an encoded control character (a NUL truncates the path in some).
//
// Nothing is canonicalized: a path with any of these is refused, with a
// message naming the problem.
func callbackPathProblem(u *url.URL) string {
	// The path as written: RawPath when it differs from the default
	// encoding of Path (which is then exactly what was written).
	written := u.RawPath
	if written == "" {
		written = u.EscapedPath()
	}
	lower := strings.ToLower(written)
	for _, e := range []struct{ esc, what string }{
		{"%2f", `an encoded "/" (%2F)`},
		{"%5c", `an encoded backslash (%5C)`},
		{"%2e", `an encoded "." (%2E)`},
		{"%3b", `an encoded ";" (%3B)`},
		{"%25", `an encoded "%" (%25: an escape escaped again)`},
	} {
		if strings.Contains(lower, e.esc) {
			return "has " + e.what + " in its path: receivers decode it in different places, so it could reach another path than the one allowed; write the path plainly"
		}
	}
	switch {
	case strings.Contains(u.Path, `\`):
		return "has a backslash in its path: some receivers read it as a \"/\""
	case strings.Contains(u.Path, ";"):
		return `has a ";" in its path: receivers that take path parameters (a Tomcat-style "..;") resolve it elsewhere`
	case strings.ContainsFunc(u.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "has a control character in its path"
	}
	segs := strings.Split(u.Path, "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Sprintf("has a %q path segment", seg)
		case seg == "" && i > 0 && i < len(segs)-1:
			return `has an empty path segment ("//"): some receivers collapse it and some do not`
		}
	}
	return ""
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
