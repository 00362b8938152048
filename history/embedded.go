package history

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// Embedded is the history store of a single server: one bbolt file in its
// data dir.
type Embedded struct {
	db *bolt.DB
}

var (
	bucketBatches = []byte("batches") // batch ID → Batch (JSON)
	bucketGroups  = []byte("groups")  // batch ID, first job ID → Group (JSON)
	bucketJobs    = []byte("jobs")    // batch ID, job ID → Job (JSON)
	bucketLedger  = []byte("ledger")  // project NUL day batch user → cost (ledgerValue)
	bucketByBatch = []byte("ledger-by-batch")
	bucketUsage   = []byte("queue-usage") // at (8 bytes), queue → usageValue (JSON)
	bucketMeta    = []byte("meta")        // "identity" → the store's identity
	bucketEff     = []byte("efficiency")  // batch ID, seq → EfficiencyRow (JSON)
	// project NUL day batch seq, user NUL day batch seq → nothing
	bucketEffByProject = []byte("efficiency-by-project")
	bucketEffByUser    = []byte("efficiency-by-user")
	// completed (8 bytes, sign flipped), batch ID → SLORun (JSON); batch
	// ID → its key there
	bucketSLO        = []byte("slo-runs")
	bucketSLOByBatch = []byte("slo-runs-by-batch")
)

// sloBackfilled marks (in bucketMeta) a store whose batches stored before
// it kept SLO runs have theirs.
var sloBackfilled = []byte("slo-runs-backfilled")

// usageValue is a queue sample's amounts.
type usageValue struct {
	Seconds, CPUMilli, Memory, Jobs int64
}

// EmbeddedFile is the store's file name in the data dir.
const EmbeddedFile = "history.db"

// OpenEmbedded opens (or creates) the store in dir.
func OpenEmbedded(dir string) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	path := filepath.Join(dir, EmbeddedFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketBatches, bucketGroups, bucketJobs, bucketLedger, bucketByBatch, bucketUsage, bucketMeta,
			bucketEff, bucketEffByProject, bucketEffByUser, bucketSLO, bucketSLOByBatch} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get([]byte("identity")) == nil {
			if err := meta.Put([]byte("identity"), []byte(rand.Text())); err != nil {
				return err
			}
		}
		if meta.Get(sloBackfilled) == nil {
			if err := backfillSLO(tx); err != nil {
				return err
			}
			return meta.Put(sloBackfilled, []byte{1})
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("history: prepare %s: %w", path, err)
	}
	return &Embedded{db: db}, nil
}

// Kind implements Store.
func (e *Embedded) Kind() string { return "embedded" }

func key64(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

func key96(batch uint64, id uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(make([]byte, 0, 12), batch), id)
}

// Stored implements Store.
func (e *Embedded) Stored(_ context.Context, batch uint64) (Stored, error) {
	b, ok, err := e.batch(batch)
	if err != nil || !ok {
		return Stored{}, err
	}
	return Stored{Version: b.Version, Timeline: b.Timeline}, nil
}

// Discard implements Store.
func (e *Embedded) Discard(_ context.Context, batch uint64) error {
	prefix := key64(batch)
	err := e.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketJobs, bucketGroups, bucketByBatch} {
			bk := tx.Bucket(name)
			var keys [][]byte
			c := bk.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				keys = append(keys, slices.Clone(k))
			}
			for _, k := range keys {
				if bytes.Equal(name, bucketByBatch) {
					if err := tx.Bucket(bucketLedger).Delete(k[8:]); err != nil {
						return err
					}
				}
				if err := bk.Delete(k); err != nil {
					return err
				}
			}
		}
		if err := dropEfficiency(tx, prefix); err != nil {
			return err
		}
		if err := putSLORun(tx, batch, nil); err != nil {
			return err
		}
		return tx.Bucket(bucketBatches).Delete(prefix)
	})
	if err != nil {
		return fmt.Errorf("history: discard batch %d: %w", batch, err)
	}
	return nil
}

// MaxBatch implements Store.
func (e *Embedded) MaxBatch(context.Context) (uint64, error) {
	var id uint64
	err := e.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketBatches).Cursor().Last(); k != nil {
			id = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return id, err
}

// Identity implements Store.
func (e *Embedded) Identity(context.Context) (string, error) {
	var id string
	err := e.db.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketMeta).Get([]byte("identity")))
		return nil
	})
	return id, err
}

// PutGroups implements Store.
func (e *Embedded) PutGroups(_ context.Context, batch uint64, groups []Group) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketGroups)
		for i := range groups {
			v, err := json.Marshal(&groups[i])
			if err != nil {
				return err
			}
			if err := bk.Put(key96(batch, groups[i].First), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutJobs implements Store.
func (e *Embedded) PutJobs(_ context.Context, batch uint64, jobs []Job) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketJobs)
		bk.FillPercent = 0.9 // jobs arrive in ID order
		for i := range jobs {
			v, err := json.Marshal(&jobs[i])
			if err != nil {
				return err
			}
			if err := bk.Put(key96(batch, jobs[i].ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func ledgerKey(r *LedgerRow) []byte {
	k := append([]byte(r.BillingProject), 0)
	k = binary.BigEndian.AppendUint32(k, uint32(r.Day)^(1<<31)) // sorts negative days first
	k = binary.BigEndian.AppendUint64(k, r.Batch)
	return append(k, r.User...)
}

// effIndexKey is the key of row seq of a batch in an index by owner
// (project or user) and day.
func effIndexKey(owner string, day int32, batch uint64, seq uint32) []byte {
	k := append([]byte(owner), 0)
	k = binary.BigEndian.AppendUint32(k, uint32(day)^(1<<31))
	k = binary.BigEndian.AppendUint64(k, batch)
	return binary.BigEndian.AppendUint32(k, seq)
}

// dropEfficiency removes the efficiency rows of the batch whose key is
// prefix, and their index entries.
func dropEfficiency(tx *bolt.Tx, prefix []byte) error {
	eff, byProject, byUser := tx.Bucket(bucketEff), tx.Bucket(bucketEffByProject), tx.Bucket(bucketEffByUser)
	type old struct {
		key []byte
		row EfficiencyRow
	}
	var olds []old
	c := eff.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		o := old{key: slices.Clone(k)}
		if err := json.Unmarshal(v, &o.row); err != nil {
			return fmt.Errorf("efficiency row %x: %w", k, err)
		}
		olds = append(olds, o)
	}
	for _, o := range olds {
		seq := binary.BigEndian.Uint32(o.key[8:])
		if err := byProject.Delete(effIndexKey(o.row.BillingProject, o.row.Day, o.row.Batch, seq)); err != nil {
			return err
		}
		if err := byUser.Delete(effIndexKey(o.row.User, o.row.Day, o.row.Batch, seq)); err != nil {
			return err
		}
		if err := eff.Delete(o.key); err != nil {
			return err
		}
	}
	return nil
}

// PutBatch implements Store.
func (e *Embedded) PutBatch(_ context.Context, b Batch, ledger []LedgerRow, effRows []EfficiencyRow) (bool, error) {
	written := false
	err := e.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBatches)
		if old := bk.Get(key64(uint64(b.ID))); old != nil {
			var prev Batch
			if err := json.Unmarshal(old, &prev); err != nil {
				return fmt.Errorf("batch %d: %w", b.ID, err)
			}
			if prev.Timeline == b.Timeline && prev.Version >= b.Version {
				return nil
			}
		}
		v, err := json.Marshal(&b)
		if err != nil {
			return err
		}
		if err := bk.Put(key64(uint64(b.ID)), v); err != nil {
			return err
		}
		led, by := tx.Bucket(bucketLedger), tx.Bucket(bucketByBatch)
		prefix := key64(uint64(b.ID))
		var stale [][]byte
		c := by.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			stale = append(stale, slices.Clone(k))
		}
		for _, k := range stale {
			if err := led.Delete(k[8:]); err != nil {
				return err
			}
			if err := by.Delete(k); err != nil {
				return err
			}
		}
		for i := range ledger {
			k := ledgerKey(&ledger[i])
			if err := led.Put(k, ledgerValue(ledger[i].Cost)); err != nil {
				return err
			}
			if err := by.Put(append(slices.Clone(prefix), k...), nil); err != nil {
				return err
			}
		}
		if err := dropEfficiency(tx, prefix); err != nil {
			return err
		}
		eff, byProject, byUser := tx.Bucket(bucketEff), tx.Bucket(bucketEffByProject), tx.Bucket(bucketEffByUser)
		for i := range effRows {
			r := &effRows[i]
			r.Batch = uint64(b.ID)
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			seq := uint32(i)
			if err := eff.Put(key96(r.Batch, seq), v); err != nil {
				return err
			}
			if err := byProject.Put(effIndexKey(r.BillingProject, r.Day, r.Batch, seq), nil); err != nil {
				return err
			}
			if err := byUser.Put(effIndexKey(r.User, r.Day, r.Batch, seq), nil); err != nil {
				return err
			}
		}
		var run *SLORun
		if r, ok := SLORunOf(&b.Batch); ok {
			run = &r
		}
		if err := putSLORun(tx, uint64(b.ID), run); err != nil {
			return err
		}
		written = true
		return nil
	})
	return written, err
}

// sloKey is a run's key: when it completed, then its batch.
func sloKey(completed int64, batch uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(completed)^(1<<63)), batch)
}

// putSLORun replaces a batch's SLO run (nil: removes it).
func putSLORun(tx *bolt.Tx, batch uint64, run *SLORun) error {
	runs, by := tx.Bucket(bucketSLO), tx.Bucket(bucketSLOByBatch)
	if old := by.Get(key64(batch)); old != nil {
		if err := runs.Delete(slices.Clone(old)); err != nil {
			return err
		}
		if err := by.Delete(key64(batch)); err != nil {
			return err
		}
	}
	if run == nil {
		return nil
	}
	v, err := json.Marshal(run)
	if err != nil {
		return err
	}
	k := sloKey(run.Completed, batch)
	if err := runs.Put(k, v); err != nil {
		return err
	}
	return by.Put(key64(batch), k)
}

// backfillSLO writes the SLO runs of the batches stored before the store
// kept them, once.
func backfillSLO(tx *bolt.Tx) error {
	return tx.Bucket(bucketBatches).ForEach(func(k, v []byte) error {
		var b Batch
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("batch %x: %w", k, err)
		}
		if r, ok := SLORunOf(&b.Batch); ok {
			return putSLORun(tx, uint64(b.ID), &r)
		}
		return nil
	})
}

// SLORuns implements Store.
func (e *Embedded) SLORuns(_ context.Context, q SLOQuery, limit int) ([]SLORun, bool, error) {
	out := []SLORun{}
	more := false
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSLO).Cursor()
		end := sloKey(q.To, 0)
		for k, v := c.Seek(sloKey(q.From, 0)); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
			if q.Hide != nil && q.Hide(binary.BigEndian.Uint64(k[8:])) {
				continue
			}
			if len(out) == limit {
				more = true
				return nil
			}
			var r SLORun
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("history: SLO run %x: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, more, err
}

func (e *Embedded) batch(id uint64) (Batch, bool, error) {
	var out Batch
	found := false
	err := e.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBatches).Get(key64(id))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &out)
	})
	if err != nil {
		return Batch{}, false, fmt.Errorf("history: batch %d: %w", id, err)
	}
	return out, found, nil
}

// Batch implements Store.
func (e *Embedded) Batch(_ context.Context, id uint64) (Batch, bool, error) { return e.batch(id) }

// ListBatches implements Store.
func (e *Embedded) ListBatches(_ context.Context, q api.BatchQuery, projects []string, lastID uint64) (api.BatchList, error) {
	out := api.BatchList{Batches: []api.Batch{}}
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBatches).Cursor()
		var k, v []byte
		if lastID == 0 {
			k, v = c.Last()
		} else {
			k, _ = c.Seek(key64(lastID))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		scanned := 0
		for ; k != nil; k, v = c.Prev() {
			id := binary.BigEndian.Uint64(k)
			if lastID != 0 && id >= lastID {
				continue
			}
			scanned++
			var b Batch
			if err := json.Unmarshal(v, &b); err != nil {
				return fmt.Errorf("batch %d: %w", id, err)
			}
			if (projects == nil || slices.Contains(projects, b.BillingProject)) && q.Match(&b.Batch) {
				out.Batches = append(out.Batches, b.Batch)
			}
			if len(out.Batches) == PageSize || scanned == maxScan {
				if pk, _ := c.Prev(); pk != nil {
					out.LastID = int64(id)
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		return api.BatchList{}, fmt.Errorf("history: list batches: %w", err)
	}
	return out, nil
}

// groupAt reads the group holding job id of batch.
func groupAt(groups *bolt.Bucket, batch uint64, id uint32) (*Group, error) {
	c := groups.Cursor()
	want := key96(batch, id)
	k, v := c.Seek(want)
	if k == nil || !bytes.Equal(k, want) {
		k, v = c.Prev()
	}
	if k == nil || binary.BigEndian.Uint64(k) != batch {
		return nil, nil
	}
	var g Group
	if err := json.Unmarshal(v, &g); err != nil {
		return nil, err
	}
	if id < g.First || id >= g.First+g.Count {
		return nil, nil
	}
	return &g, nil
}

// ListJobs implements Store.
func (e *Embedded) ListJobs(_ context.Context, batch uint64, q api.JobQuery, lastID uint32) (api.JobList, error) {
	out := api.JobList{Jobs: []api.Job{}}
	states := q.States()
	err := e.db.View(func(tx *bolt.Tx) error {
		groups := tx.Bucket(bucketGroups)
		c := tx.Bucket(bucketJobs).Cursor()
		var g *Group
		scanned := 0
		for k, v := c.Seek(key96(batch, lastID+1)); k != nil && binary.BigEndian.Uint64(k) == batch; k, v = c.Next() {
			scanned++
			var j Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("job %d: %w", binary.BigEndian.Uint32(k[8:]), err)
			}
			if states == nil || slices.Contains(states, j.State) {
				if g == nil || j.ID < g.First || j.ID >= g.First+g.Count {
					var err error
					if g, err = groupAt(groups, batch, j.ID); err != nil {
						return fmt.Errorf("group of job %d: %w", j.ID, err)
					}
					if g == nil {
						return fmt.Errorf("job %d has no group", j.ID)
					}
				}
				if full := JobOf(batch, g, &j); q.Match(&full, g.Job.Name) {
					out.Jobs = append(out.Jobs, full)
				}
			}
			if len(out.Jobs) == PageSize || scanned == maxScan {
				if nk, _ := c.Next(); nk != nil && binary.BigEndian.Uint64(nk) == batch {
					out.LastID = int64(j.ID)
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		return api.JobList{}, fmt.Errorf("history: jobs of batch %d: %w", batch, err)
	}
	return out, nil
}

// Job implements Store.
func (e *Embedded) Job(_ context.Context, batch uint64, id uint32) (api.Job, bool, error) {
	var out api.Job
	found := false
	err := e.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketJobs).Get(key96(batch, id))
		if v == nil {
			return nil
		}
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return err
		}
		g, err := groupAt(tx.Bucket(bucketGroups), batch, id)
		if err != nil || g == nil {
			return fmt.Errorf("no group: %v", err)
		}
		out, found = JobOf(batch, g, &j), true
		return nil
	})
	if err != nil {
		return api.Job{}, false, fmt.Errorf("history: job %d of batch %d: %w", id, batch, err)
	}
	return out, found, nil
}

// Ledger implements Store.
func (e *Embedded) Ledger(_ context.Context, project string, from, to int32) ([]LedgerRow, error) {
	out := []LedgerRow{}
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLedger).Cursor()
		prefix := append([]byte(project), 0)
		start := ledgerKey(&LedgerRow{BillingProject: project, Day: from})
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rest := k[len(prefix):]
			day := int32(binary.BigEndian.Uint32(rest) ^ (1 << 31))
			if day > to {
				break
			}
			out = append(out, LedgerRow{BillingProject: project, Day: day, Batch: binary.BigEndian.Uint64(rest[4:]),
				User: string(rest[12:]), Cost: ledgerCost(v)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: ledger of %s: %w", project, err)
	}
	return out, nil
}

// Efficiency implements Store.
func (e *Embedded) Efficiency(_ context.Context, q EfficiencyQuery, limit int) ([]EfficiencyRow, bool, error) {
	out := []EfficiencyRow{}
	more := false
	err := e.db.View(func(tx *bolt.Tx) error {
		index, owner := tx.Bucket(bucketEffByProject), q.BillingProject
		if owner == "" {
			index, owner = tx.Bucket(bucketEffByUser), q.User
		}
		eff := tx.Bucket(bucketEff)
		prefix := append([]byte(owner), 0)
		c := index.Cursor()
		for k, _ := c.Seek(effIndexKey(owner, q.From, 0, 0)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			rest := k[len(prefix):]
			if int32(binary.BigEndian.Uint32(rest)^(1<<31)) > q.To {
				break
			}
			if q.Hide != nil && q.Hide(binary.BigEndian.Uint64(rest[4:12])) {
				continue
			}
			v := eff.Get(rest[4:])
			if v == nil {
				return fmt.Errorf("index entry %x names no row", k)
			}
			var r EfficiencyRow
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("efficiency row %x: %w", rest[4:], err)
			}
			if q.User != "" && r.User != q.User {
				continue
			}
			if len(out) == limit {
				more = true
				break
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("history: efficiency of %+v: %w", q, err)
	}
	return out, more, nil
}

// PutQueueUsage implements Store.
func (e *Embedded) PutQueueUsage(_ context.Context, samples []QueueSample) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketUsage)
		for _, s := range samples {
			v, err := json.Marshal(usageValue{s.Seconds, s.CPUMilli, s.Memory, s.Jobs})
			if err != nil {
				return err
			}
			k := append(key64(uint64(s.At)), s.Queue...)
			if s.Cluster != "" {
				k = append(append(k, 0), s.Cluster...)
			}
			if err := bk.Put(k, v); err != nil {
				return fmt.Errorf("history: store queue usage: %w", err)
			}
		}
		return nil
	})
}

// QueueUsage implements Store.
func (e *Embedded) QueueUsage(_ context.Context, from, to int64) ([]QueueSample, error) {
	out := []QueueSample{}
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		for k, v := c.Seek(key64(uint64(max(from, 0)))); len(k) >= 8 && int64(binary.BigEndian.Uint64(k)) < to; k, v = c.Next() {
			var u usageValue
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("history: queue usage: %w", err)
			}
			queue, cluster, _ := strings.Cut(string(k[8:]), "\x00")
			out = append(out, QueueSample{Queue: queue, Cluster: cluster, At: int64(binary.BigEndian.Uint64(k)), Seconds: u.Seconds, CPUMilli: u.CPUMilli, Memory: u.Memory, Jobs: u.Jobs})
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b QueueSample) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Cluster, b.Cluster), cmp.Compare(a.At, b.At))
	})
	return out, err
}

// PruneQueueUsage implements Store. Samples are keyed by time first, so
// the oldest are the bucket's first keys.
func (e *Embedded) PruneQueueUsage(ctx context.Context, before int64) (int64, error) {
	var deleted int64
	for {
		if err := ctx.Err(); err != nil {
			return deleted, fmt.Errorf("history: prune queue usage: %w", err)
		}
		n := 0
		err := e.db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketUsage)
			var keys [][]byte
			c := bk.Cursor()
			for k, _ := c.First(); len(k) >= 8 && int64(binary.BigEndian.Uint64(k)) < before && len(keys) < PruneChunk; k, _ = c.Next() {
				keys = append(keys, slices.Clone(k))
			}
			for _, k := range keys {
				if err := bk.Delete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			return deleted, fmt.Errorf("history: prune queue usage: %w", err)
		}
		deleted += int64(n)
		if n < PruneChunk {
			return deleted, nil
		}
	}
}

// Ping implements Store.
func (e *Embedded) Ping(context.Context) error {
	return e.db.View(func(*bolt.Tx) error { return nil })
}

// Close implements Store.
func (e *Embedded) Close() error { return e.db.Close() }

// ledgerNanos marks a ledger value written since integral money: the
// byte, then the cost in nano-dollars as a big-endian int64. A value of
// 8 bytes is the float64 bits of dollars that stores before wrote.
const ledgerNanos = 'n'

// ledgerValue is how the ledger keeps a cost.
func ledgerValue(c money.Amount) []byte {
	return binary.BigEndian.AppendUint64([]byte{ledgerNanos}, uint64(c))
}

// ledgerCost reads a ledger value: nano-dollars, or the float dollars of
// a store written before integral money, rounded once to the nearest
// nano-dollar.
func ledgerCost(v []byte) money.Amount {
	if len(v) == 9 && v[0] == ledgerNanos {
		return money.Amount(binary.BigEndian.Uint64(v[1:]))
	}
	if len(v) == 8 {
		return money.FromDollars(math.Float64frombits(binary.BigEndian.Uint64(v)))
	}
	return 0
}
