package ui

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

func TestDollarsRoundOnceToTheCent(t *testing.T) {
	for _, c := range []struct {
		a    money.Amount
		want string
	}{
		{0, "$0.00"}, {money.Cent / 2, "$0.01"}, {money.Cent/2 - 1, "$0.00"}, {1234567 * money.Cent, "$12,345.67"},
		{-150 * money.Cent, "-$1.50"}, {money.Dollar * 1_000_000, "$1,000,000.00"},
	} {
		if got := dollars(c.a); got != c.want {
			t.Errorf("dollars(%s) = %s, want %s", c.a, got, c.want)
		}
	}
	if got := perHour(money.DollarPerHour * 9215 / 1000); got != "$9.2150/h" {
		t.Errorf("perHour = %s", got)
	}
}

// TestInertShowsControlsAsSymbols: a job's terminal escapes and bidi
// overrides reach the page as visible symbols, not as themselves.
func TestInertShowsControlsAsSymbols(t *testing.T) {
	got := inert("a\x1b[31mred\x07\u202eevil\x7f\tok\n")
	if strings.ContainsAny(got, "\x1b\x07\u202e\x7f") || !strings.Contains(got, "␛[31mred") || !strings.Contains(got, "\tok\n") {
		t.Fatalf("inert: %q", got)
	}
}

// TestLoginGoesOnlyToThisUI: where a login sends the browser next is a
// page of this UI, never another site.
func TestLoginGoesOnlyToThisUI(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/batches/3": "/ui/batches/3", "": "/ui/", "https://evil.example/": "/ui/", "//evil.example/ui/": "/ui/",
		"/ui/\\evil": "/ui/", "/api/v1/batches": "/ui/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// TestSessionCookieFlags: HttpOnly and SameSite=Strict always, Secure
// under TLS, limited to the UI's path and to the session's expiry.
func TestSessionCookieFlags(t *testing.T) {
	for _, secure := range []bool{false, true} {
		w := httptest.NewRecorder()
		expires := time.Now().Add(time.Hour)
		setCookie(w, "acc.tok", expires, secure)
		c := w.Result().Cookies()[0]
		if !c.HttpOnly || c.SameSite != 3 /* Strict */ || c.Secure != secure || c.Path != Prefix || c.MaxAge <= 0 || c.MaxAge > 3600 {
			t.Errorf("secure=%v: %+v", secure, c)
		}
	}
}

func TestCSRFTokenIsPerSession(t *testing.T) {
	a, b := csrfToken("one"), csrfToken("two")
	if a == b || len(a) != 64 || a != csrfToken("one") || strings.Contains(a, "one") {
		t.Fatalf("csrf tokens %q %q", a, b)
	}
}

func TestTemplatesParse(t *testing.T) {
	pages, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"login", "error", "batches", "batch", "job", "billing", "clusters", "queues", "autoscaler", "audit"} {
		if pages[name] == nil {
			t.Errorf("no template %s", name)
		}
	}
}
