package ui

import (
	"fmt"
	"html/template"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

var funcs = template.FuncMap{
	"dollars":     dollars,
	"costLine":    costLine,
	"perHour":     perHour,
	"when":        when,
	"ago":         ago,
	"span":        span,
	"size":        func(n int64) string { return units.FormatBytes(n) },
	"inert":       inert,
	"progress":    progressBar,
	"join":        strings.Join,
	"cores":       func(v float64) string { return trimFloat(v) },
	"pct":         pct,
	"fraction":    func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"usageBar":    usageBar,
	"capacityBar": capacityBar,
	"deref":       func(p *int) int { return *p },
	"lastJob":     func(s api.Stage) int64 { return s.FirstJob + s.NJobs - 1 },
	"capCPU":      capCPU,
	"status":      batchStatus,
	"derefAmount": func(p *money.Amount) money.Amount { return *p },
	"sub":         func(a, b float64) float64 { return a - b },
	"sumCost": func(pc *api.ProjectCost) money.Amount {
		if pc == nil {
			return 0
		}
		var sum money.Amount
		for _, r := range pc.Rows {
			sum = sum.Add(r.Cost).Add(r.Running)
		}
		return sum
	},
	"indent":      func(path string) int { return strings.Count(path, "/") },
	"last":        func(path string) string { return path[strings.LastIndex(path, "/")+1:] },
	"can":         func(b *api.Batch, action string) bool { return b != nil && b.Can(action) },
	"stateClass":  stateClass,
	"groupStatus": groupStatus,
	"groupDepth":  groupDepth,
	"groupName":   groupName,
	"add":         func(a, b int64) int64 { return a + b },
}

// dollars shows an amount as every page, the CLI and the API's sentences
// do (money.Amount.Display): to the cent from a dollar up ($1,234.56),
// below it with two significant digits ($0.000043), so that only zero
// reads $0.00. A total is the exact sum, formatted once.
func dollars(a money.Amount) string { return a.Display() }

// perHour shows a price an hour to a hundredth of a cent ($0.0353/h), or
// with two significant digits below it ($0.000012/h).
func perHour(r money.Rate) string { return r.Display() + "/h" }

// costLine says what one resource's part of an attempt's price
// multiplies: the units held, the rate per unit-hour and which rate it
// is, and their product ("compute/default/local-a: 0.25 cores ×
// $0.1412/core·h (rate compute/default/local-a v2) = $0.0353/h").
// PricePerHour of a cost line is the rate per unit-hour, not the line's
// price; the product is taken exactly and rounded once.
func costLine(l api.CostLine) string {
	one, many := unitName(l.Resource)
	units := strconv.FormatFloat(l.Units, 'f', 6, 64)
	units = strings.TrimRight(strings.TrimRight(units, "0"), ".")
	held := units + " " + many
	if units == "1" {
		held = units + " " + one
	}
	if l.Rate == "" {
		return fmt.Sprintf("%s: %s, no rate set: %s", l.Resource, held, perHour(0))
	}
	rate := "rate " + l.Rate
	if l.Version > 0 {
		rate += fmt.Sprintf(" v%d", l.Version)
	}
	x := exactUnits(l.Units)
	product := l.PricePerHour.Times(x)
	total := perHour(product)
	if product == 0 && l.PricePerHour > 0 && x.Sign() > 0 {
		// Less than the nano-dollar an hour a Rate counts, but not
		// nothing.
		total = "< " + perHour(money.NanodollarPerHour)
	}
	return fmt.Sprintf("%s: %s × %s/%s·h (%s) = %s", l.Resource, held, l.PricePerHour.Display(), one, rate, total)
}

// unitName is what one unit of a resource is called, and many of them:
// cores for compute and the service fee (charged per core), GiB for
// memory, GPUs.
func unitName(resource string) (one, many string) {
	kind, _, _ := strings.Cut(resource, "/")
	switch kind {
	case "compute", "service-fee":
		return "core", "cores"
	case "memory":
		return "GiB", "GiB"
	case "gpu":
		return "GPU", "GPUs"
	}
	return "unit", "units"
}

// exactUnits is the quantity a cost line's float Units stands for:
// thousandths of a core as the decimal it was (0.1, not the float nearest
// to it), and memory in bytes over 2^30 as the float holds it exactly.
func exactUnits(u float64) *big.Rat {
	if d, ok := new(big.Rat).SetString(strconv.FormatFloat(u, 'f', -1, 64)); ok {
		if new(big.Int).Mod(big.NewInt(1000), d.Denom()).Sign() == 0 {
			return d
		}
	}
	x := new(big.Rat)
	if math.IsNaN(u) || math.IsInf(u, 0) {
		return x
	}
	return x.SetFloat64(u)
}

func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if v == nil {
			return ""
		}
		return when(*v)
	}
	return ""
}

// ago says how long ago a time was, as people read it.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return age(time.Since(t)) + " ago"
}

// age says a duration as people read an age: 42s, 17m, 3h 5m, 4 days.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// span is how long an attempt ran (to now while it runs).
func span(start, end *time.Time) string {
	if start == nil {
		return ""
	}
	e := time.Now()
	if end != nil {
		e = *end
	}
	return units.RoundDuration(e.Sub(*start)).String()
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}

func pct(part, whole float64) string {
	if whole <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

// inert shows a string a job or a user chose with its control characters
// (terminal escapes among them) as visible symbols, so nothing but text
// reaches the page; html/template escapes the rest.
func inert(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r < 0x20:
			return 0x2400 + r // ␛ and its kin
		case r == 0x7f:
			return 0x2421
		case unicode.Is(unicode.Cc, r) || r == '\u202e' || r == '\u202d' || r == '\u2066' || r == '\u2067' || r == '\u2068' || r == '\u2069':
			return '\ufffd' // C1 controls and bidi overrides
		}
		return r
	}, s)
}

// segment is one part of a bar.
type segment struct {
	class string
	label string
	n     float64
}

// bar draws segments as an SVG bar of the given width, with a title
// naming each; the text is escaped here, as the template would.
func bar(width, height int, total float64, title string, segs []segment) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bar" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, width, height, width, height, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect class="bar-bg" x="0" y="0" width="%d" height="%d"></rect>`, width, height)
	x := 0.0
	if total > 0 {
		for _, s := range segs {
			if s.n <= 0 {
				continue
			}
			w := float64(width) * s.n / total
			fmt.Fprintf(&b, `<rect class="%s" x="%.2f" y="0" width="%.2f" height="%d"><title>%s</title></rect>`, s.class, x, w, height, template.HTMLEscapeString(s.label))
			x += w
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// progressBar is a batch's jobs by state.
func progressBar(b *api.Batch) template.HTML {
	segs := []segment{
		{"st-success", fmt.Sprintf("%d succeeded", b.NSucceeded), float64(b.NSucceeded)},
		{"st-failed", fmt.Sprintf("%d failed", b.NFailed), float64(b.NFailed)},
		{"st-error", fmt.Sprintf("%d error", b.NError), float64(b.NError)},
		{"st-cancelled", fmt.Sprintf("%d cancelled", b.NCancelled), float64(b.NCancelled)},
		{"st-running", fmt.Sprintf("%d running", b.NRunning), float64(b.NRunning)},
		{"st-ready", fmt.Sprintf("%d ready", b.NReady), float64(b.NReady)},
	}
	title := fmt.Sprintf("%d of %d jobs done: %d succeeded, %d failed, %d running, %d ready, %d pending",
		b.NCompleted, b.NJobs, b.NSucceeded, b.NFailed+b.NError, b.NRunning, b.NReady, b.NPending)
	return bar(200, 14, float64(b.NJobs), title, segs)
}

// usageBar is a use against a limit: used within the guarantee, used
// beyond it (borrowed), and the room up to the cap.
func usageBar(used, guarantee, capacity float64) template.HTML {
	whole := max(capacity, guarantee, used)
	within := min(used, guarantee)
	borrowed := max(used-guarantee, 0)
	title := fmt.Sprintf("%s used of %s guaranteed", trimFloat(used), trimFloat(guarantee))
	if capacity > 0 {
		title += fmt.Sprintf(" (at most %s)", trimFloat(capacity))
	}
	if borrowed > 0 {
		title += fmt.Sprintf(", %s borrowed", trimFloat(borrowed))
	}
	return bar(160, 12, whole, title, []segment{
		{"use-within", trimFloat(within) + " within guarantee", within},
		{"use-borrowed", trimFloat(borrowed) + " borrowed", borrowed},
		{"use-room", "room to the guarantee", max(guarantee-used, 0)},
	})
}

// batchStatus is a batch's state as people ask it (Hail's words):
// running, success, failure or cancelled.
func batchStatus(b *api.Batch) string {
	switch {
	case b.Cancelled:
		return "cancelled"
	case !b.Complete():
		return "running"
	case b.NFailed+b.NError+b.NCancelled > 0:
		return "failure"
	}
	return "success"
}

// groupStatus is a job group's state as a batch's reads (batchStatus).
func groupStatus(g *api.JobGroup) string {
	switch {
	case g.Cancelled:
		return "cancelled"
	case g.State != api.BatchComplete:
		return "running"
	case g.NFailed+g.NError+g.NCancelled > 0:
		return "failure"
	}
	return "success"
}

// groupDepth is how deep a job group lies under its batch (0: at the top).
func groupDepth(g *api.JobGroup) int { return strings.Count(g.Path, "/") }

// groupName is the last name of a job group's path.
func groupName(g *api.JobGroup) string { return g.Path[strings.LastIndexByte(g.Path, '/')+1:] }

// stateClass is the CSS class of a state's colour.
func stateClass(st string) string {
	return "st-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		return '-'
	}, st)
}

// capacityBar is the cores in use of a capacity.
func capacityBar(used, capacity float64) template.HTML {
	return bar(160, 12, capacity, fmt.Sprintf("%s of %s cores in use", trimFloat(used), trimFloat(capacity)),
		[]segment{{"use-within", trimFloat(used) + " in use", used}})
}
