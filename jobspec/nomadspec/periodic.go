package nomadspec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/cronexpr"
	nomad "github.com/hashicorp/nomad/api"
)

// NextLaunch is when a periodic job launches next after a time: the
// earliest of its cron expressions (Nomad's cron dialect, through the
// parser Nomad uses), read in its time zone (UTC when none). The zero time
// means never again.
func NextLaunch(p *nomad.PeriodicConfig, after time.Time) (time.Time, error) {
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
	var next time.Time
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
