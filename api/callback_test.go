package api

import (
	"net/url"
	"strings"
	"testing"
)

func TestCallbackAllowed(t *testing.T) {
	allow, err := ParseCallbackAllow([]string{"https://hooks.example.com/drover/", "http://10.0.0.5:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]bool{
		"https://hooks.example.com/drover/done":        true,
		"https://HOOKS.example.com/drover/a/b?x=1":     true,
		"https://hooks.example.com/drover":             true,
		"https://hooks.example.com/droverx":            false, // not under the path
		"https://hooks.example.com/other":              false,
		"http://hooks.example.com/drover/done":         false, // another scheme
		"https://hooks.example.com:8443/drover/done":   false, // another port
		"https://evil.example.com/drover/done":         false,
		"https://hooks.example.com.evil.com/drover/x":  false,
		"http://10.0.0.5:8080/anything":                true,
		"http://10.0.0.5/anything":                     false,
		"https://hooks.example.com/drover/../admin/x":  false, // ".." is refused: a receiver would resolve it
		"https://hooks.example.com/drover/%2e%2e/x":    false, // nor escaped
		"http://169.254.169.254/computeMetadata/v1/x":  false,
		"https://hooks.example.com%2Fdrover%2F@evil/x": false,
	} {
		u, err := ParseCallback("callback", raw)
		got := err == nil && CallbackAllowed(u, allow)
		if got != want {
			t.Errorf("%s: allowed %v (%v), want %v", raw, got, err, want)
		}
	}
	if CallbackAllowed(mustParse(t, "https://hooks.example.com/drover/x"), nil) {
		t.Error("no allowed destination allows everything")
	}
	for raw, msg := range map[string]string{
		"ftp://x/y":                   "use an http or https URL",
		"https://u:p@hooks.example/x": "carries a user or password",
		"https:///x":                  "names no host",
		"https://h/x#frag":            "has a fragment",
		"https://h/" + strings.Repeat("a", MaxCallbackBytes): "the limit is 2048",
	} {
		if _, err := ParseCallback("callback", raw); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%.40s: %v, want %q", raw, err, msg)
		}
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := ParseCallback("callback", raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCallbackHostilePaths: a callback path a receiver could resolve to
// another path than the one the allow-list check saw (dot segments, path
// parameters, backslashes, encoded separators, empty segments) is refused,
// naming the problem, before CallbackAllowed looks at it; plain paths
// under the allowed prefix (with queries, encoded spaces, unreserved
// escapes, a trailing slash) are accepted and left as written.
func TestCallbackHostilePaths(t *testing.T) {
	allow, err := ParseCallbackAllow([]string{"https://hooks.example.com/hooks/"})
	if err != nil {
		t.Fatal(err)
	}
	const h = "https://hooks.example.com"
	for _, c := range []struct{ path, problem string }{
		{"/hooks/..;/admin", `has a ";" in its path`},
		{"/hooks/%2e%2e/admin", `an encoded "." (%2E)`},
		{"/hooks/%2E%2E/admin", `an encoded "." (%2E)`},
		{"/hooks/.%2e/admin", `an encoded "." (%2E)`},
		{"/hooks/../admin", `has a ".." path segment`},
		{"/hooks/./x", `has a "." path segment`},
		{`/hooks\..\admin`, "has a backslash in its path"},
		{`/hooks/x\y`, "has a backslash in its path"},
		{"/hooks/%5c..%5cadmin", "an encoded backslash (%5C)"},
		{"/hooks/%5C", "an encoded backslash (%5C)"},
		{"/hooks/x%2fy", `an encoded "/" (%2F)`},
		{"/hooks%2F..%2Fadmin", `an encoded "/" (%2F)`},
		{"/hooks;jsessionid=x", `has a ";" in its path`},
		{"/hooks/x;a=b", `has a ";" in its path`},
		{"/hooks/x%3b/admin", `an encoded ";" (%3B)`},
		{"/hooks/%252e%252e/admin", `an encoded "%" (%25`},
		{"/hooks//admin", `has an empty path segment ("//")`},
		{"/hooks/x%00", "has a control character in its path"},
		{"/hooks/x%0a", "has a control character in its path"},
	} {
		raw := h + c.path
		_, err := ParseCallback("callback", raw)
		if err == nil || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: %v; want it refused saying %q", c.path, err, c.problem)
		}
	}
	for _, path := range []string{
		"/hooks", "/hooks/", "/hooks/done", "/hooks/a/b/", "/hooks/done?batch=1&x=..;/a\\b", "/hooks/a%20b",
		"/hooks/%7Euser", "/hooks/v1.2/done", "/hooks/..x/y.", "/hooks/a=b,c@d:e",
	} {
		raw := h + path
		u, err := ParseCallback("callback", raw)
		if err != nil || !CallbackAllowed(u, allow) {
			t.Errorf("%s: refused (%v)", path, err)
			continue
		}
		if u.String() != raw {
			t.Errorf("%s is POSTed to %s", raw, u.String())
		}
	}
	// The allowed destinations are held to the same rule.
	if _, err := ParseCallbackAllow([]string{h + "/hooks;x/"}); err == nil || !strings.Contains(err.Error(), `";"`) {
		t.Errorf("an allowed destination with a path parameter: %v", err)
	}
}
