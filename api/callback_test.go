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
