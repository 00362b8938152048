package apiview

import (
	"fmt"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// GroupDecls turns the job groups a request declares (validated:
// api.ValidateJobGroups) into the command's declarations, and numbers
// the group of each of its jobs (specs[i] became entries[i]) in them. A
// job may name a group declared here or one the batch has already
// (exists; nil: none, a new batch): such a group is declared by its path
// alone. A declared group's parent must be declared before it or exist.
func GroupDecls(groups []api.JobGroupSpec, specs []api.JobSpec, entries []state.JobEntry, exists func(path string) bool) ([]state.JobGroupDecl, error) {
	if exists == nil {
		exists = func(string) bool { return false }
	}
	index := make(map[string]uint32, len(groups))
	var decls []state.JobGroupDecl
	for i := range groups {
		g := &groups[i]
		if k := strings.LastIndexByte(g.Path, '/'); k >= 0 {
			if parent := g.Path[:k]; index[parent] == 0 && !exists(parent) {
				return nil, fmt.Errorf("job_groups[%d] (%s): its parent %s is neither declared before it nor a group of the batch", i, g.Path, parent)
			}
		}
		decls = append(decls, state.JobGroupDecl{Path: g.Path, Attributes: g.Attributes, Callback: g.Callback, CancelAfter: uint32(g.CancelAfterNFailures),
			Gang: g.Gang, GangUniformity: g.GangUniformity})
		index[g.Path] = uint32(len(decls))
	}
	for i := range specs {
		path := specs[i].JobGroup
		if path == "" {
			continue
		}
		ref := index[path]
		if ref == 0 {
			if !exists(path) {
				return nil, fmt.Errorf("jobs[%d] (job_id %d): job_group %s is neither declared in job_groups nor a group of the batch", i, specs[i].JobID, path)
			}
			if len(decls) >= api.MaxJobGroupsPerRequest {
				return nil, fmt.Errorf("jobs name more than %d job groups in one request", api.MaxJobGroupsPerRequest)
			}
			decls = append(decls, state.JobGroupDecl{Path: path})
			ref = uint32(len(decls))
			index[path] = ref
		}
		entries[i].Spec = entries[i].Spec.InJobGroup(ref)
	}
	byGang, err := api.ValidateGangGroups(groups, specs)
	if err != nil {
		return nil, err
	}
	// The jobs of a gang group are its gang's members (by job ID): each
	// entry knows how many come before it.
	for k := range groups {
		g := &groups[k]
		if !g.Gang {
			continue
		}
		m := byGang[g.Path]
		first := specs[m.Specs[0]].JobID
		for _, i := range m.Specs {
			entries[i].Spec = entries[i].Spec.InGang(&state.Gang{Size: uint32(m.Jobs), Uniform: g.GangUniformity, Lead: uint32(specs[i].JobID - first)})
		}
	}
	return decls, nil
}

// JobGroup is a job group's status as the API shows it.
func JobGroup(r *state.JobGroupRecord, now time.Time) api.JobGroup {
	out := api.JobGroup{
		BatchID: int64(r.Batch), ID: int64(r.ID), ParentID: int64(r.Parent), Path: r.Path, Attributes: r.Attributes,
		State: api.BatchRunning, Cancelled: r.Cancelled, CancelReason: r.CancelReason,
		CancelAfterNFailures: int64(r.CancelAfterFailures), Callback: r.Callback, CallbackResult: r.CallbackResult,
		NJobs:         r.NJobs,
		NPending:      r.Count(state.Pending),
		NReady:        r.Count(state.Ready),
		NRunning:      r.Count(state.Running) + r.Count(state.Creating),
		NSucceeded:    r.Count(state.Success),
		NFailed:       r.Count(state.Failed),
		NCancelled:    r.Count(state.Cancelled),
		NError:        r.Count(state.Error),
		TimeCompleted: timePtr(r.Completed),
		Cost:          r.Cost(now.UnixNano()),
		Gang:          r.Gang, GangUniformity: r.GangUniformity,
	}
	out.NCompleted = out.NSucceeded + out.NFailed + out.NCancelled + out.NError
	if r.Completed != 0 {
		out.State = api.BatchComplete
	}
	return out
}
