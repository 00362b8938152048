package nomadspec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cronexpr"
	nomad "github.com/hashicorp/nomad/api"
)

// NextLaunch is when a periodic job launches next after a time: the
// earliest of its cron expressions (Nomad's cron dialect, through the
// parser Nomad uses), read in its time zone (UTC when none). The zero time
// means never again.
func NextLaunch(p *nomad.PeriodicConfig, after time.Time) (next time.Time, err error) {
	defer func() {
		// cronexpr panics on some expressions it parsed (Nomad's issue
		// 4223): a refusal, never a crash of the leader.
		if r := recover(); r != nil {
			next, err = time.Time{}, fmt.Errorf("cron: %v", r)
		}
	}()
	loc := time.UTC
	if tz := deref(p.TimeZone); tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return time.Time{}, fmt.Errorf("time_zone %q: %w", tz, err)
		}
		loc = l
	}
	specs := p.Specs
	if s := deref(p.Spec); s != "" {
		specs = append([]string{s}, specs...)
	}
	if len(specs) > MaxCrons {
		return time.Time{}, fmt.Errorf("%d cron expressions; a periodic job has at most %d", len(specs), MaxCrons)
	}
	for _, s := range specs {
		if err := checkCron(s); err != nil {
			return time.Time{}, err
		}
	}
	for _, s := range specs {
		e, err := cronexpr.Parse(s)
		if err != nil {
			return time.Time{}, fmt.Errorf("cron %q: %w", s, err)
		}
		if n := e.Next(after.In(loc)); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, nil
}

// MaxCrons bounds a periodic job's cron expressions, and MaxCronBytes
// each one's length.
const (
	MaxCrons     = 8
	MaxCronBytes = 128
)

// checkCron refuses what cronexpr would take and spend its time on (or
// panic on): a long expression, or a range that runs backwards ("59-0").
func checkCron(s string) error {
	if len(s) > MaxCronBytes {
		return fmt.Errorf("cron %.40q...: at most %d bytes", s, MaxCronBytes)
	}
	for _, field := range strings.Fields(s) {
		for _, part := range strings.Split(field, ",") {
			part, _, _ = strings.Cut(part, "/")
			lo, hi, ok := strings.Cut(part, "-")
			if !ok {
				continue
			}
			a, err1 := cronValue(lo)
			b, err2 := cronValue(hi)
			if err1 == nil && err2 == nil && a > b {
				return fmt.Errorf("cron %q: the range %s runs backwards", s, part)
			}
		}
	}
	return nil
}

// cronNames are the names cron takes for months and days of the week.
var cronNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

func cronValue(s string) (int, error) {
	if v, ok := cronNames[strings.ToUpper(s)]; ok {
		return v, nil
	}
	return strconv.Atoi(s)
}

// clone copies a job deeply, through its JSON (the form it travels in).
func clone(j *nomad.Job) (*nomad.Job, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	out := new(nomad.Job)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}
