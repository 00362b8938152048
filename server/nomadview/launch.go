package nomadview

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/jobspec/nomadspec"
	"github.com/drover-sched/drover/server/state"
)

// Launch names how a template's child is made.
type Launch struct {
	// At is the periodic launch this child is (0: a dispatch or a
	// forced launch), Now when it is made.
	At, Now time.Time
	// Dispatch: the child of a dispatch, with its meta, payload and
	// idempotency token.
	Dispatch bool
	Meta     map[string]string
	Payload  []byte
	Token    string
	// Priority (1 to 100; 0: the job's) and Prefix (an ID prefix the
	// dispatch names) of a dispatch.
	Priority int
	Prefix   string
}

// ChildID is Nomad's ID of a template's child: parent/periodic-<unix
// seconds> for a periodic launch (parent/periodic-<unix
// seconds>-forced-<nanoseconds> for a forced one), parent/dispatch-<unix
// seconds>-<8 hex>
// for a dispatch (the hex from the token, or the time, so that every
// server names it alike).
func ChildID(parent string, l Launch) string {
	if !l.Dispatch {
		if l.At.IsZero() {
			// Forced: not to meet a scheduled launch of the same second.
			return fmt.Sprintf("%s/periodic-%d-forced-%09d", parent, l.Now.Unix(), l.Now.Nanosecond())
		}
		return fmt.Sprintf("%s/periodic-%d", parent, l.At.Unix())
	}
	sum := sha256.Sum256([]byte(l.Token + "\x00" + strconv.FormatInt(l.Now.UnixNano(), 10)))
	if l.Prefix != "" {
		return fmt.Sprintf("%s/dispatch-%s-%d-%s", parent, l.Prefix, l.Now.Unix(), hex.EncodeToString(sum[:4]))
	}
	return fmt.Sprintf("%s/dispatch-%d-%s", parent, l.Now.Unix(), hex.EncodeToString(sum[:4]))
}

// Child is a template's child as Nomad makes it: the template's spec
// with the child's ID and parent, the dispatch's meta merged and its
// payload, neither periodic nor parameterized any more; and its
// translation into a batch.
func Child(rec *state.NomadJob, l Launch) (*nomad.Job, *nomadspec.Translation, error) {
	reg := &Registered{Rec: *rec}
	job, err := reg.Spec()
	if err != nil {
		return nil, nil, err
	}
	if l.Dispatch {
		p := job.ParameterizedJob
		if p == nil {
			return nil, nil, fmt.Errorf("job %q is not parameterized: it cannot be dispatched", rec.ID)
		}
		switch {
		case p.Payload == "required" && len(l.Payload) == 0:
			return nil, nil, fmt.Errorf("job %q requires a payload", rec.ID)
		case p.Payload == "forbidden" && len(l.Payload) > 0:
			return nil, nil, fmt.Errorf("job %q forbids a payload", rec.ID)
		}
		for _, k := range p.MetaRequired {
			if _, ok := l.Meta[k]; !ok {
				return nil, nil, fmt.Errorf("job %q requires the meta key %q", rec.ID, k)
			}
		}
		for k := range l.Meta {
			allowed := false
			for _, a := range append(append([]string(nil), p.MetaRequired...), p.MetaOptional...) {
				allowed = allowed || a == k
			}
			if !allowed {
				return nil, nil, fmt.Errorf("job %q does not allow the meta key %q (meta_required, meta_optional)", rec.ID, k)
			}
		}
		job.Dispatched = true
		job.Payload = l.Payload
		if l.Priority > 0 {
			job.Priority = &l.Priority
		}
	} else if job.Periodic == nil {
		return nil, nil, fmt.Errorf("job %q is not periodic", rec.ID)
	}
	id := ChildID(rec.ID, l)
	job.ID, job.Name, job.ParentID = &id, &id, &rec.ID
	job.Periodic = nil
	if len(l.Meta) > 0 {
		if job.Meta == nil {
			job.Meta = map[string]string{}
		}
		maps.Copy(job.Meta, l.Meta)
	}
	tr, err := nomadspec.Translate(job, nil)
	if err != nil {
		return nil, nil, err
	}
	if tr.Periodic != nil || tr.Parameterized != nil {
		return nil, nil, fmt.Errorf("job %q: its child would be a template again", rec.ID)
	}
	tr.Batch.BillingProject = rec.Project
	return job, tr, nil
}
