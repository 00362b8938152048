package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

var funcs = template.FuncMap{
	"dollars":     dollars,
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
	"indent":     func(path string) int { return strings.Count(path, "/") },
	"last":       func(path string) string { return path[strings.LastIndex(path, "/")+1:] },
	"can":        func(b *api.Batch, action string) bool { return b != nil && b.Can(action) },
	"stateClass": stateClass,
}

// dollars shows an amount rounded to the cent ($1,234.56), as the CLI
// does: halves away from zero, once, from the exact sum.
func dollars(a money.Amount) string {
	c := int64(a.Round(money.Cent) / money.Cent)
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s$%s.%02d", sign, thousands(c/100), c%100)
}

// perHour shows a price an hour to a hundredth of a cent ($0.0123/h).
func perHour(r money.Rate) string {
	unit := money.CentPerHour / 100
	c := int64(r.Round(unit) / unit)
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s$%s.%04d/h", sign, thousands(c/10000), c%10000)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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
