package state

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-sched/drover/placement"
)

// A tree's settings regenerated from history (Monarch's loop): the leader
// runs the recommendation over a top queue's tree on its auto_apply
// schedule, bounds each change, and records the result as one
// AutoApplyQueues entry, which changes every queue it names at once (or,
// a dry run, only records the proposal). Each change is a version of the
// tree's settings, kept with what it replaced, so RollbackQueues can put
// back what the tree had before any of them.

// QueueSetting is what a regeneration sets of one queue: its weight, its
// cpu guarantee and its max_running jobs.
type QueueSetting struct {
	Path           string
	Weight         int64
	GuaranteeMilli int64
	MaxRunningJobs int64
	// HomeClusters: the clusters its new attempts go to (a rebalancing
	// step's move; nil: any).
	HomeClusters []string
}

// Same reports whether two settings are alike.
func (a QueueSetting) Same(b QueueSetting) bool {
	return a.Path == b.Path && a.Weight == b.Weight && a.GuaranteeMilli == b.GuaranteeMilli && a.MaxRunningJobs == b.MaxRunningJobs &&
		slices.Equal(a.HomeClusters, b.HomeClusters)
}

// Kinds of QueueVersion.
const (
	VersionAutoApply = "auto_apply"
	VersionDryRun    = "dry_run"
	VersionRefused   = "refused"
	VersionRollback  = "rollback"
	// VersionRebalance: moves made by hand (drover queue rebalance
	// -apply), which leave the tree's schedule as it was.
	VersionRebalance = "rebalance"
)

// QueueVersion is one regeneration of a tree's settings: applied (Kind
// auto_apply or rollback), only proposed (dry_run), or refused because
// the tree would not be valid (refused, Note says why). Before and After
// are the settings of the queues it changes.
type QueueVersion struct {
	Seq     uint64
	Tree    string
	At      int64
	By      string
	Kind    string
	Before  []QueueSetting
	After   []QueueSetting
	Note    string
	Applied bool
}

// Bounds on what the entries carry and the state keeps.
const (
	// MaxQueueVersions bounds the versions kept of all trees together.
	MaxQueueVersions = 2000
	// MaxVersionNote bounds a version's note.
	MaxVersionNote = 4096
)

// AutoApplyQueues sets the tree's queues it names to After, as one
// change (DryRun: only records it), and records when the tree was last
// regenerated (Now), whether or not anything changed. Before, when set,
// holds the settings After was computed from, in the same order: a queue
// whose settings changed since (an operator's change between the
// leader's read and this entry) keeps them, and the note says so.
type AutoApplyQueues struct {
	Now    int64
	Tree   string
	By     string
	DryRun bool
	After  []QueueSetting
	Note   string
	Before []QueueSetting
	// Rebalance: the entry is drover queue rebalance -apply's moves, not
	// the tree's scheduled step (its last run stays as it was).
	Rebalance bool
}

// RollbackQueues puts back the settings a tree had before version Seq:
// every version of the tree from Seq on is undone, as a new version.
type RollbackQueues struct {
	Now  int64
	Tree string
	Seq  uint64
	By   string
}

// AutoApplyResult says what an AutoApplyQueues or RollbackQueues did:
// the version it recorded (0: none, nothing changed).
type AutoApplyResult struct {
	Version QueueVersion
}

func (*AutoApplyQueues) Type() CommandType { return CmdAutoApplyQueues }
func (*RollbackQueues) Type() CommandType  { return CmdRollbackQueues }

// ValidateAutoApply checks an AutoApplyQueues's bounds as apply will.
func ValidateAutoApply(c *AutoApplyQueues) error {
	if len(c.After) > placement.MaxQueues {
		return fmt.Errorf("%d queue settings; a tree holds at most %d queues", len(c.After), placement.MaxQueues)
	}
	if len(c.Before) > 0 && len(c.Before) != len(c.After) {
		return fmt.Errorf("%d settings before and %d after: want as many", len(c.Before), len(c.After))
	}
	seen := make(map[string]bool, len(c.After))
	for i, q := range c.After {
		if q.Path != c.Tree && !strings.HasPrefix(q.Path, c.Tree+placement.QueueSep) {
			return fmt.Errorf("queue %s is not in the tree %s", q.Path, c.Tree)
		}
		if seen[q.Path] {
			return fmt.Errorf("queue %s is named twice", q.Path)
		}
		seen[q.Path] = true
		if len(c.Before) > 0 && c.Before[i].Path != q.Path {
			return fmt.Errorf("setting %d is of %s before and of %s after", i, c.Before[i].Path, q.Path)
		}
		if q.Weight < 1 || q.Weight > placement.MaxQueueWeight || q.GuaranteeMilli < 0 || q.GuaranteeMilli > placement.MaxQueueMilli || q.MaxRunningJobs < 0 {
			return fmt.Errorf("queue %s: weight %d, guarantee %d millicores or max_running %d jobs out of bounds", q.Path, q.Weight, q.GuaranteeMilli, q.MaxRunningJobs)
		}
		if len(q.HomeClusters) > placement.MaxQueueAllowFrom {
			return fmt.Errorf("queue %s: %d home clusters; at most %d", q.Path, len(q.HomeClusters), placement.MaxQueueAllowFrom)
		}
		for _, c := range q.HomeClusters {
			if err := placement.ValidateName("queue "+q.Path+": home cluster", c); err != nil {
				return err
			}
		}
	}
	if len(c.Note) > MaxVersionNote || len(c.By) > MaxAuditField {
		return fmt.Errorf("a note of %d bytes or a name of %d; at most %d and %d", len(c.Note), len(c.By), MaxVersionNote, MaxAuditField)
	}
	return nil
}

// declared reports whether every cluster named is declared (a route to
// a cluster removed since would leave the queue's jobs waiting for ever).
func (s *placeBook) declared(clusters []string) bool {
	for _, c := range clusters {
		if s.clusters[c] == nil {
			return false
		}
	}
	return true
}

// rebase applies the change from before to after onto now, setting by
// setting; ok is false when a setting it changes is no longer what
// before says.
func rebase(now, before, after QueueSetting) (QueueSetting, bool) {
	out := now
	if after.Weight != before.Weight {
		if now.Weight != before.Weight {
			return now, false
		}
		out.Weight = after.Weight
	}
	if after.GuaranteeMilli != before.GuaranteeMilli {
		if now.GuaranteeMilli != before.GuaranteeMilli {
			return now, false
		}
		out.GuaranteeMilli = after.GuaranteeMilli
	}
	if after.MaxRunningJobs != before.MaxRunningJobs {
		if now.MaxRunningJobs != before.MaxRunningJobs {
			return now, false
		}
		out.MaxRunningJobs = after.MaxRunningJobs
	}
	if !slices.Equal(after.HomeClusters, before.HomeClusters) {
		if !slices.Equal(now.HomeClusters, before.HomeClusters) {
			return now, false
		}
		out.HomeClusters = slices.Clone(after.HomeClusters)
	}
	return out, true
}

// SettingOf is what a regeneration sets of q now.
func SettingOf(q *Queue) QueueSetting {
	return QueueSetting{Path: q.Path, Weight: q.EffectiveWeight(), GuaranteeMilli: q.Guarantee.CPUMilli, MaxRunningJobs: q.Limits.MaxRunningJobs,
		HomeClusters: slices.Clone(q.HomeClusters)}
}

// setQueues changes the queues to the settings, as one change: refused
// (and nothing changed) when the tree it leaves is not valid. It returns
// the settings it replaced, of the queues it changed, and the new ones.
func (s *placeBook) setQueues(settings []QueueSetting, now int64) (before, after []QueueSetting, err *ApplyError) {
	next := make(map[string]*Queue, len(s.queues))
	for p, q := range s.queues {
		next[p] = q
	}
	for _, st := range settings {
		old := s.queues[st.Path]
		if old == nil {
			return nil, nil, errorf(ErrNotFound, "queue %s does not exist", st.Path)
		}
		if SettingOf(old).Same(st) {
			continue
		}
		q := *old
		q.Queue = cloneQueue(old.Queue)
		q.Projects, q.AllowProjects = slices.Clone(old.Projects), slices.Clone(old.AllowProjects)
		q.Weight, q.Guarantee.CPUMilli, q.Limits.MaxRunningJobs = st.Weight, st.GuaranteeMilli, st.MaxRunningJobs
		q.HomeClusters = slices.Clone(st.HomeClusters)
		next[st.Path] = &q
		before, after = append(before, SettingOf(old)), append(after, st)
	}
	if len(after) == 0 {
		return nil, nil, nil
	}
	if err := s.checkTree(next); err != nil {
		return nil, nil, err
	}
	for _, st := range after {
		s.queues[st.Path] = next[st.Path]
	}
	s.recomputeQueueUse()
	s.notifyWork()
	return before, after, nil
}

// recordVersion appends a version of a tree, keeping the tree's last
// keep and MaxQueueVersions in all.
func (s *placeBook) recordVersion(v QueueVersion, keep int64) QueueVersion {
	s.versionSeq++
	v.Seq = s.versionSeq
	s.queueVersions = append(s.queueVersions, v)
	n := int64(0)
	for i := len(s.queueVersions) - 1; i >= 0; i-- {
		if s.queueVersions[i].Tree != v.Tree {
			continue
		}
		if n++; n > keep {
			s.queueVersions = slices.Delete(s.queueVersions, i, i+1)
		}
	}
	if over := len(s.queueVersions) - MaxQueueVersions; over > 0 {
		s.queueVersions = slices.Delete(s.queueVersions, 0, over)
	}
	return v
}

// forgetGoneTrees drops the versions and the last run of trees whose top
// queue no longer exists: a tree made again under the name starts afresh.
func (s *placeBook) forgetGoneTrees() {
	s.queueVersions = slices.DeleteFunc(s.queueVersions, func(v QueueVersion) bool { return s.queues[v.Tree] == nil })
	for tree := range s.autoRuns {
		if s.queues[tree] == nil {
			delete(s.autoRuns, tree)
		}
	}
}

// keepOf is how many versions a tree keeps.
func (s *placeBook) keepOf(tree string) int64 {
	if q := s.queues[tree]; q != nil {
		return q.AutoApply.Versions()
	}
	return placement.DefaultAutoKeep
}

func (s *State) applyAutoApplyQueues(c *AutoApplyQueues) any {
	if err := ValidateAutoApply(c); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	top := s.queues[c.Tree]
	if top == nil || strings.Contains(c.Tree, placement.QueueSep) {
		return errorf(ErrNotFound, "queue tree %q does not exist (name a top queue)", c.Tree)
	}
	v := QueueVersion{Tree: c.Tree, At: c.Now, By: cmp.Or(c.By, "drover"), Note: c.Note, Kind: VersionAutoApply}
	if c.Rebalance {
		v.Kind = VersionRebalance
	} else {
		s.autoRuns[c.Tree] = c.Now
	}
	// Each setting the entry changes goes from what it had in Before to
	// After on top of what the queue has now, unless that setting changed
	// since the proposal was made (or the queue is gone): then the queue
	// keeps what it has.
	after := c.After
	if len(c.Before) > 0 {
		after = nil
		var kept []string
		for i, st := range c.After {
			q := s.queues[st.Path]
			if q == nil {
				kept = append(kept, st.Path)
				continue
			}
			next, ok := rebase(SettingOf(q), c.Before[i], st)
			if !ok || !s.declared(next.HomeClusters) {
				kept = append(kept, st.Path)
				continue
			}
			after = append(after, next)
		}
		if len(kept) > 0 {
			v.Note = cut(fmt.Sprintf("changed since the proposal, kept: %s; %s", strings.Join(kept, ", "), v.Note), MaxVersionNote)
		}
	}
	if c.DryRun {
		for _, st := range after {
			if q := s.queues[st.Path]; q != nil && !SettingOf(q).Same(st) {
				v.Before, v.After = append(v.Before, SettingOf(q)), append(v.After, st)
			}
		}
		if len(v.After) == 0 {
			return &AutoApplyResult{}
		}
		v.Kind = VersionDryRun
		return &AutoApplyResult{Version: s.recordVersion(v, s.keepOf(c.Tree))}
	}
	before, changed, err := s.setQueues(after, c.Now)
	if err != nil {
		v.Kind, v.Note = VersionRefused, cut(err.Error()+"; "+v.Note, MaxVersionNote)
		return &AutoApplyResult{Version: s.recordVersion(v, s.keepOf(c.Tree))}
	}
	if len(changed) == 0 {
		return &AutoApplyResult{}
	}
	v.Before, v.After, v.Applied = before, changed, true
	v = s.recordVersion(v, s.keepOf(c.Tree))
	s.auditVersion(&v)
	return &AutoApplyResult{Version: v}
}

func (s *State) applyRollbackQueues(c *RollbackQueues) any {
	if len(c.By) > MaxAuditField {
		return errorf(ErrInvalid, "a name of %d bytes; at most %d", len(c.By), MaxAuditField)
	}
	if s.queues[c.Tree] == nil || strings.Contains(c.Tree, placement.QueueSep) {
		return errorf(ErrNotFound, "queue tree %q does not exist (name a top queue)", c.Tree)
	}
	// Each setting a version from Seq on changed goes back to the value it
	// had before the earliest of them: walking the versions newest first,
	// each older one overwrites. A setting none of them changed keeps what
	// it has now (a route moved since by hand stays where it was moved).
	restore := map[string]QueueSetting{}
	found := false
	for i := len(s.queueVersions) - 1; i >= 0; i-- {
		v := &s.queueVersions[i]
		if v.Tree != c.Tree || v.Seq < c.Seq {
			continue
		}
		if v.Seq == c.Seq {
			if !v.Applied {
				return errorf(ErrConflict, "version %d of %s was not applied (%s): there is nothing to roll back", c.Seq, c.Tree, v.Kind)
			}
			found = true
		}
		if !v.Applied {
			continue
		}
		for j, b := range v.Before {
			if j >= len(v.After) {
				break
			}
			a := v.After[j]
			r, ok := restore[b.Path]
			if !ok {
				q := s.queues[b.Path]
				if q == nil {
					continue // removed since: nothing to put back
				}
				r = SettingOf(q)
			}
			if a.Weight != b.Weight {
				r.Weight = b.Weight
			}
			if a.GuaranteeMilli != b.GuaranteeMilli {
				r.GuaranteeMilli = b.GuaranteeMilli
			}
			if a.MaxRunningJobs != b.MaxRunningJobs {
				r.MaxRunningJobs = b.MaxRunningJobs
			}
			if !slices.Equal(a.HomeClusters, b.HomeClusters) && s.declared(b.HomeClusters) {
				r.HomeClusters = slices.Clone(b.HomeClusters) // a route to a cluster removed since stays as it is
			}
			restore[b.Path] = r
		}
	}
	if !found {
		return errorf(ErrNotFound, "version %d of %s is not kept; drover queue history %s lists the versions", c.Seq, c.Tree, c.Tree)
	}
	settings := make([]QueueSetting, 0, len(restore))
	for _, p := range sortedKeys(restore) {
		if s.queues[p] != nil { // a queue removed since has nothing to put back
			settings = append(settings, restore[p])
		}
	}
	before, after, err := s.setQueues(settings, c.Now)
	if err != nil {
		return err
	}
	v := QueueVersion{Tree: c.Tree, At: c.Now, By: cmp.Or(c.By, "drover"), Kind: VersionRollback, Before: before, After: after, Applied: true,
		Note: fmt.Sprintf("rolled back to before version %d", c.Seq)}
	if len(after) == 0 {
		return &AutoApplyResult{}
	}
	v = s.recordVersion(v, s.keepOf(c.Tree))
	s.auditVersion(&v)
	return &AutoApplyResult{Version: v}
}

// auditVersion records an applied version in the audit log, as the
// change of placement it is.
func (s *State) auditVersion(v *QueueVersion) {
	var words []string
	for i, a := range v.After {
		b := v.Before[i]
		w := fmt.Sprintf("%s weight %d->%d guarantee %g->%g cores max_running %d->%d", a.Path, b.Weight, a.Weight,
			float64(b.GuaranteeMilli)/1000, float64(a.GuaranteeMilli)/1000, b.MaxRunningJobs, a.MaxRunningJobs)
		if !slices.Equal(a.HomeClusters, b.HomeClusters) {
			w += fmt.Sprintf(" home_clusters [%s]->[%s]", strings.Join(b.HomeClusters, ","), strings.Join(a.HomeClusters, ","))
		}
		words = append(words, w)
	}
	s.applyAudit(&Audit{Entries: []AuditEntry{{Time: v.At, User: v.By, Method: "APPLY", Route: "queue " + v.Kind,
		Path: v.Tree, Status: 200, Message: fmt.Sprintf("version %d: %s", v.Seq, strings.Join(words, "; "))}}})
}

// QueueVersions lists the versions kept of a tree ("": of every tree),
// oldest first, and when each tree was last regenerated.
func (s *placeBook) QueueVersions(tree string) []QueueVersion {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []QueueVersion
	for _, v := range s.queueVersions {
		if tree == "" || v.Tree == tree {
			v.Before, v.After = slices.Clone(v.Before), slices.Clone(v.After)
			out = append(out, v)
		}
	}
	return out
}

// LastAutoApply is when a tree was last regenerated (0: never).
func (r Reader) LastAutoApply(tree string) int64 { return r.s.autoRuns[tree] }
