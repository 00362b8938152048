package ui

import (
	"fmt"
	"html/template"
	"time"
)

// Times are written in UTC, in a <time> element with the instant in its
// datetime attribute and UTC in its title: ui.js shows them in the
// browser's local time (UTC stays on hover) and keeps relative times
// ("3m ago") ticking; without the script, the page reads in UTC.

func init() {
	funcs["timeTag"] = timeTag
	funcs["agoTag"] = agoTag
	funcs["jobCost"] = jobCost
}

// timeTag is a time as a <time> element (nil or zero: nothing).
func timeTag(t any) template.HTML {
	var v time.Time
	switch x := t.(type) {
	case time.Time:
		v = x
	case *time.Time:
		if x != nil {
			v = *x
		}
	}
	if v.IsZero() {
		return ""
	}
	utc := when(v)
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s" data-local>%s</time>`,
		esc(v.UTC().Format(time.RFC3339)), esc(utc), esc(utc)))
}

// agoTag is how long ago a time was, as a <time> element the script
// keeps up to date.
func agoTag(t time.Time) template.HTML {
	if t.IsZero() {
		return ""
	}
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s" data-ago>%s</time>`,
		esc(t.UTC().Format(time.RFC3339)), esc(when(t)), esc(ago(t))))
}
