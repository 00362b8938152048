package ui

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

// Charts are SVG drawn here, on the server: no script draws them and
// nothing is fetched to do it. Every text in them is escaped with
// template.HTMLEscapeString.

var esc = template.HTMLEscapeString

// dayBar is one bar of a chart by day.
type dayBar struct {
	Day  string
	Cost money.Amount
}

// costChart draws a project's cost by day as bars, each labelled with its
// amount to the cent.
func costChart(title string, days []dayBar) template.HTML {
	const h, top, bottom, left = 180, 20, 40, 10
	bw := 28
	w := left*2 + bw*len(days)
	if w < 200 {
		w = 200
	}
	var most money.Amount
	for _, d := range days {
		most = max(most, d.Cost)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, esc(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, left, h-bottom, w-left, h-bottom)
	for i, d := range days {
		x := left + i*bw
		bh := 0.0
		if most > 0 {
			bh = float64(h-top-bottom) * float64(d.Cost) / float64(most)
		}
		amount := dollars(d.Cost)
		fmt.Fprintf(&b, `<g class="day" data-day="%s" data-cost="%s"><rect class="cost" x="%d" y="%.1f" width="%d" height="%.1f"><title>%s: %s</title></rect>`,
			esc(d.Day), esc(amount), x+3, float64(h-bottom)-bh, bw-6, bh, esc(d.Day), esc(amount))
		if d.Cost > 0 {
			fmt.Fprintf(&b, `<text class="amount" x="%d" y="%.1f" text-anchor="middle">%s</text>`, x+bw/2, float64(h-bottom)-bh-4, esc(amount))
		}
		if i%3 == 0 || i == len(days)-1 {
			fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="middle">%s</text>`, x+bw/2, h-bottom+14, esc(strings.TrimPrefix(d.Day[min(5, len(d.Day)):], "")))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// spendChart draws the fleet's spend an hour over time as a step line,
// with the cap as a line across (none: no cap).
func spendChart(points []api.SpendPoint, cap money.Rate) template.HTML {
	const w, h, top, bottom, left, right = 640, 200, 16, 30, 70, 10
	if len(points) == 0 {
		return template.HTML(`<p class="muted">No machines in the last hours.</p>`)
	}
	most := cap
	for _, p := range points {
		most = max(most, p.SpendPerHour)
	}
	if most == 0 {
		most = money.DollarPerHour
	}
	t0, t1 := points[0].Time, points[len(points)-1].Time
	sx := func(t time.Time) float64 {
		if !t1.After(t0) {
			return left
		}
		return left + float64(w-left-right)*float64(t.Sub(t0))/float64(t1.Sub(t0))
	}
	sy := func(r money.Rate) float64 {
		return float64(h-bottom) - float64(h-top-bottom)*float64(r)/float64(most)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h,
		esc(fmt.Sprintf("Spend an hour from %s to %s, now %s", when(t0), when(t1), perHour(points[len(points)-1].SpendPerHour))))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, sy(most)+4, esc(perHour(most)))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">$0/h</text>`, left-4, h-bottom+4)
	var path strings.Builder
	for i, p := range points {
		x, y := sx(p.Time), sy(p.SpendPerHour)
		if i == 0 {
			fmt.Fprintf(&path, "M%.1f %.1f", x, y)
		} else {
			fmt.Fprintf(&path, " H%.1f V%.1f", x, y)
		}
	}
	fmt.Fprintf(&b, `<path class="spend" d="%s"></path>`, path.String())
	if cap > 0 {
		fmt.Fprintf(&b, `<line class="cap" x1="%d" y1="%.1f" x2="%d" y2="%.1f"><title>cap %s</title></line>`, left, sy(cap), w-right, sy(cap), esc(perHour(cap)))
		fmt.Fprintf(&b, `<text class="tick cap-label" x="%d" y="%.1f" text-anchor="end">cap %s</text>`, w-right, sy(cap)-4, esc(perHour(cap)))
	}
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d">%s</text>`, left, h-8, esc(t0.UTC().Format("15:04")))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`, w-right, h-8, esc(t1.UTC().Format("15:04 UTC")))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// gantt draws the attempts of a page of jobs over time: one row per job,
// one bar per attempt, coloured by its state (a legend names them); an
// attempt placed on a worker that has not started it yet is a sliver at
// now, so the chart has a bar for every attempt the table counts.
func gantt(jobs []api.Job, now time.Time) template.HTML {
	jobs = slices.Clone(jobs)
	for i := range jobs {
		atts := slices.Clone(jobs[i].Attempts)
		for k := range atts {
			if atts[k].StartTime == nil && atts[k].State == api.JobRunning {
				atts[k].StartTime = &now
			}
		}
		jobs[i].Attempts = atts
	}
	var t0, t1 time.Time
	for _, j := range jobs {
		for _, a := range j.Attempts {
			if a.StartTime == nil {
				continue
			}
			end := now
			if a.EndTime != nil {
				end = *a.EndTime
			}
			if t0.IsZero() || a.StartTime.Before(t0) {
				t0 = *a.StartTime
			}
			if end.After(t1) {
				t1 = end
			}
		}
	}
	if t0.IsZero() {
		return template.HTML(`<p class="muted">No attempt of these jobs has started.</p>`)
	}
	const w, row, left, right = 640, 12, 60, 10
	h := row*len(jobs) + 24
	total := t1.Sub(t0)
	if total <= 0 {
		total = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h,
		esc(fmt.Sprintf("Attempts of jobs %d to %d over %s", jobs[0].JobID, jobs[len(jobs)-1].JobID, span(&t0, &t1))))
	for i, j := range jobs {
		y := i * row
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%d</text>`, left-4, y+row-2, j.JobID)
		for _, a := range j.Attempts {
			if a.StartTime == nil {
				continue
			}
			end := now
			if a.EndTime != nil {
				end = *a.EndTime
			}
			x := left + float64(w-left-right)*float64(a.StartTime.Sub(t0))/float64(total)
			bw := max(float64(w-left-right)*float64(end.Sub(*a.StartTime))/float64(total), 1)
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`, stateClass(a.State),
				x, y+1, bw, row-2, esc(fmt.Sprintf("job %d attempt %d on %s: %s, %s", j.JobID, a.Attempt, a.Instance, a.State, span(a.StartTime, a.EndTime))))
		}
	}
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d">%s</text>`, left, h-6, esc(t0.UTC().Format("15:04:05")))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`, w-right, h-6, esc(t1.UTC().Format("15:04:05 UTC")))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// dagChart draws a batch's stages in columns by depth (a stage one column
// right of the deepest it waits on), with an arrow from each parent.
func dagChart(stages []api.Stage) template.HTML {
	if len(stages) < 2 || len(stages) > 60 {
		return ""
	}
	depth := make([]int, len(stages))
	rows := map[int]int{}
	row := make([]int, len(stages))
	cols := 0
	for i, s := range stages {
		for _, p := range s.DependsOn {
			depth[i] = max(depth[i], depth[p]+1)
		}
		row[i] = rows[depth[i]]
		rows[depth[i]]++
		cols = max(cols, depth[i]+1)
	}
	most := 0
	for _, n := range rows {
		most = max(most, n)
	}
	const bw, bh, gx, gy = 120, 30, 50, 14
	w, h := cols*(bw+gx), most*(bh+gy)+gy
	pos := func(i int) (float64, float64) { return float64(depth[i]*(bw+gx) + 4), float64(row[i]*(bh+gy) + gy) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart dag" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, esc(fmt.Sprintf("DAG of %d stages", len(stages))))
	for i, s := range stages {
		x, y := pos(i)
		for _, p := range s.DependsOn {
			px, py := pos(p)
			fmt.Fprintf(&b, `<line class="edge" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"></line>`, px+bw, py+bh/2, x, y+bh/2)
		}
	}
	for i, s := range stages {
		x, y := pos(i)
		name := s.Name
		if len([]rune(name)) > 16 {
			name = string([]rune(name)[:15]) + "…"
		}
		fmt.Fprintf(&b, `<g class="stage"><rect x="%.0f" y="%.0f" width="%d" height="%d" rx="4"></rect><text x="%.0f" y="%.0f">%s</text><title>%s: %d jobs from %d</title></g>`,
			x, y, bw, bh, x+6, y+19, esc(inert(name)+fmt.Sprintf(" ×%d", s.NJobs)), esc(inert(s.Name)), s.NJobs, s.FirstJob)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// usageChart draws an attempt's usage over time from its samples: the
// cores it used between two samples, and the memory charged at each,
// each against what the job asked for (a dashed line).
func usageChart(samples []api.UsageSample, cpu float64, memory int64) template.HTML {
	if len(samples) < 2 {
		return template.HTML(`<p class="muted">No usage over time yet: a worker reports a sample about once a minute while an attempt runs, and one at its end.</p>`)
	}
	t0, t1 := samples[0].Time, samples[len(samples)-1].Time
	total := t1.Sub(t0)
	if total <= 0 {
		total = time.Second
	}
	type pt struct {
		t time.Duration
		v float64
	}
	var cores, mem []pt
	most := 0.0
	for i, s := range samples {
		mem = append(mem, pt{s.Time.Sub(t0), float64(s.Memory)})
		if i > 0 {
			if dt := s.Time.Sub(samples[i-1].Time).Seconds(); dt > 0 {
				c := max(s.CPUSeconds-samples[i-1].CPUSeconds, 0) / dt
				cores = append(cores, pt{samples[i-1].Time.Sub(t0), c}, pt{s.Time.Sub(t0), c})
				most = max(most, c)
			}
		}
	}
	peak := samples[len(samples)-1].PeakMemory
	draw := func(title string, points []pt, asked, top float64, label func(float64) string) string {
		const w, h, left, right, topPad, bottom = 300, 120, 56, 8, 10, 22
		top = max(top, asked, 1e-9)
		sx := func(d time.Duration) float64 { return left + float64(w-left-right)*float64(d)/float64(total) }
		sy := func(v float64) float64 { return float64(h-bottom) - float64(h-topPad-bottom)*v/top }
		var b strings.Builder
		fmt.Fprintf(&b, `<svg class="chart usage" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, esc(title))
		fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, left, h-bottom, w-right, h-bottom)
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, sy(top)+4, esc(label(top)))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">0</text>`, left-4, h-bottom+4)
		if asked > 0 {
			fmt.Fprintf(&b, `<line class="cap" x1="%d" y1="%.1f" x2="%d" y2="%.1f"><title>asked %s</title></line>`, left, sy(asked), w-right, sy(asked), esc(label(asked)))
		}
		var path strings.Builder
		for i, p := range points {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, sx(p.t), sy(p.v))
		}
		fmt.Fprintf(&b, `<path class="spend" d="%s"><title>%s</title></path>`, strings.TrimSpace(path.String()), esc(title))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d">0s</text>`, left, h-6)
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`, w-right, h-6, esc(units.RoundDuration(total).String()))
		b.WriteString(`</svg>`)
		return b.String()
	}
	var maxMem float64
	for _, p := range mem {
		maxMem = max(maxMem, p.v)
	}
	memLabel := func(v float64) string { return units.FormatBytes(int64(v)) }
	coreLabel := func(v float64) string { return trimFloat(v) + " cores" }
	c := draw(fmt.Sprintf("Cores used over %s, at most %s; asked %s", units.RoundDuration(total), trimFloat(most), trimFloat(cpu)), cores, cpu, most, coreLabel)
	m := draw(fmt.Sprintf("Memory over %s, peak %s; asked %s", units.RoundDuration(total), units.FormatBytes(peak), units.FormatBytes(memory)), mem, float64(memory), maxMem, memLabel)
	return template.HTML(`<div class="usage-charts"><figure>` + c + `<figcaption>Cores used (dashed: asked)</figcaption></figure><figure>` + m +
		`<figcaption>Memory (dashed: asked; peak ` + esc(units.FormatBytes(peak)) + `)</figcaption></figure></div>`)
}
