package ui

import (
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// TestDollarsShowEveryAmountButZeroAsNonZero: amounts read to the cent
// from a dollar up, rounded once; below, with the places that show them
// non-zero ($0.000043, a $0.001 limit as $0.001), never $0.00; rates
// likewise, to a hundredth of a cent or two significant digits.
func TestDollarsShowEveryAmountButZeroAsNonZero(t *testing.T) {
	for _, c := range []struct {
		a    money.Amount
		want string
	}{
		{0, "$0.00"}, {money.Cent / 2, "$0.005"}, {money.Cent/2 - 1, "$0.005"}, {1234567 * money.Cent, "$12,345.67"},
		{-150 * money.Cent, "-$1.50"}, {money.Dollar * 1_000_000, "$1,000,000.00"},
		{1234*money.Dollar + 56*money.Cent + money.Cent/2, "$1,234.57"},
		{43 * money.Microdollar, "$0.000043"}, {money.Dollar / 1000, "$0.001"}, {34, "$0.000000034"},
	} {
		if got := dollars(c.a); got != c.want {
			t.Errorf("dollars(%s) = %s, want %s", c.a, got, c.want)
		}
	}
	for _, c := range []struct {
		r    money.Rate
		want string
	}{
		{money.DollarPerHour * 9215 / 1000, "$9.2150/h"}, {35_300_000, "$0.0353/h"}, {12_000, "$0.000012/h"}, {0, "$0.0000/h"},
	} {
		if got := perHour(c.r); got != c.want {
			t.Errorf("perHour(%s) = %s, want %s", c.r, got, c.want)
		}
	}
}

// TestCostLineSaysWhatItMultiplies: a cost line's PricePerHour is the
// rate per unit-hour; the line shows the units, that rate and which rate
// it is, and their product, so the arithmetic on the page is right.
func TestCostLineSaysWhatItMultiplies(t *testing.T) {
	for _, c := range []struct {
		l    api.CostLine
		want string
	}{
		{api.CostLine{Resource: "compute/default/local-a", Rate: "compute/default/local-a", Version: 2, Units: 0.25, PricePerHour: 141_200_000},
			"compute/default/local-a: 0.25 cores × $0.1412/core·h (rate compute/default/local-a v2) = $0.0353/h"},
		{api.CostLine{Resource: "service-fee", Rate: "service-fee", Version: 1, Units: 1, PricePerHour: 10_000_000},
			"service-fee: 1 core × $0.0100/core·h (rate service-fee v1) = $0.0100/h"},
		// 300 MiB at $0.000123 a GiB-hour, a rate of the kind's.
		{api.CostLine{Resource: "memory/default", Rate: "memory", Units: 300.0 / 1024, PricePerHour: 123_000},
			"memory/default: 0.292969 GiB × $0.00012/GiB·h (rate memory) = $0.000036/h"},
		{api.CostLine{Resource: "gpu/a100", Rate: "gpu", Version: 3, Units: 1, PricePerHour: 2 * money.DollarPerHour},
			"gpu/a100: 1 GPU × $2.0000/GPU·h (rate gpu v3) = $2.0000/h"},
		{api.CostLine{Resource: "memory/default", Units: 0.5},
			"memory/default: 0.5 GiB, no rate set: $0.0000/h"},
		{api.CostLine{Resource: "compute/x", Rate: "compute", Units: 0.001, PricePerHour: 1},
			"compute/x: 0.001 cores × $0.000000001/core·h (rate compute) = < $0.000000001/h"},
	} {
		if got := costLine(c.l); got != c.want {
			t.Errorf("costLine(%+v)\n got %s\nwant %s", c.l, got, c.want)
		}
	}
	// Thousandths of a core are the decimal they were, not the float
	// nearest to it; memory's 2^30ths are the float itself.
	if got := exactUnits(0.1); got.Cmp(big.NewRat(1, 10)) != 0 {
		t.Errorf("0.1 cores are %s", got)
	}
	if got := exactUnits(300.0 / 1024); got.Cmp(big.NewRat(300, 1024)) != 0 {
		t.Errorf("300 MiB are %s GiB", got)
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
