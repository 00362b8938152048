package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// JobSource is the job entries of one submission. Client.Submit reads it a
// bunch at a time, so a client can submit millions of jobs without holding
// them all.
type JobSource interface {
	// Len is the number of entries.
	Len() int
	// NumJobs is the number of job IDs the entries occupy.
	NumJobs() int64
	// Entries returns entries i to j-1. Submit calls it once per range, from
	// several goroutines at once.
	Entries(i, j int) []JobSpec
}

// Jobs is a JobSource over a slice of entries.
type Jobs []JobSpec

// Len implements JobSource.
func (j Jobs) Len() int { return len(j) }

// NumJobs implements JobSource.
func (j Jobs) NumJobs() int64 {
	var n int64
	for i := range j {
		n += j[i].NumJobs()
	}
	return n
}

// Entries implements JobSource.
func (j Jobs) Entries(lo, hi int) []JobSpec { return j[lo:hi] }

// GeneratedJobs is a JobSource of N single jobs, entry i made on demand by
// Make, which must give it JobID i+1.
type GeneratedJobs struct {
	N    int
	Make func(i int) JobSpec
}

// Len implements JobSource.
func (g GeneratedJobs) Len() int { return g.N }

// NumJobs implements JobSource.
func (g GeneratedJobs) NumJobs() int64 { return int64(g.N) }

// Entries implements JobSource.
func (g GeneratedJobs) Entries(lo, hi int) []JobSpec {
	out := make([]JobSpec, hi-lo)
	for i := range out {
		out[i] = g.Make(lo + i)
	}
	return out
}

// SubmitOptions tunes Client.Submit; the zero value takes the defaults.
type SubmitOptions struct {
	// InlineEntries is the most job entries sent in the create request
	// itself (default 1000): a small batch costs one round trip.
	InlineEntries int
	// BunchSize is the number of job entries per request for a larger
	// batch (default 5000).
	BunchSize int
	// Concurrency is how many bunches are posted at once (default 8).
	Concurrency int
}

func (o *SubmitOptions) withDefaults() SubmitOptions {
	out := SubmitOptions{InlineEntries: 1000, BunchSize: 5000, Concurrency: 8}
	if o != nil {
		if o.InlineEntries > 0 {
			out.InlineEntries = o.InlineEntries
		}
		if o.BunchSize > 0 {
			out.BunchSize = o.BunchSize
		}
		if o.Concurrency > 0 {
			out.Concurrency = o.Concurrency
		}
	}
	return out
}

// NewToken returns a random token of the form servers accept from clients
// (64 hex digits).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewIdempotencyKey returns a random key for a create request.
func NewIdempotencyKey() string {
	buf := make([]byte, 12)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// Submit creates a batch with its jobs and returns it once they are
// committed. This is the update protocol: a batch of at most
// InlineEntries entries is created with its jobs in one request (the fast
// path); a larger one is created with an update reserving every job ID,
// the entries are posted in bunches by Concurrency requests at once, and
// the update is committed. req.IdempotencyKey is set when empty, so the
// create request, like every later one, can be retried without making a
// second batch. Every bunch is validated before it is sent; when a bunch is
// refused, the half-submitted batch is cancelled and the error names the
// entry.
func (c *Client) Submit(ctx context.Context, req *CreateBatchRequest, jobs JobSource, opts *SubmitOptions) (*Batch, error) {
	o := opts.withDefaults()
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = NewIdempotencyKey()
	}
	n := jobs.Len()
	if n <= o.InlineEntries {
		req.Jobs, req.NJobs = jobs.Entries(0, n), 0
		if err := ValidateJobs(req.Jobs); err != nil {
			return nil, err
		}
		res, err := c.CreateBatch(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("create batch: %w", err)
		}
		return &res.Batch, nil
	}
	req.Jobs, req.NJobs = nil, jobs.NumJobs()
	res, err := c.CreateBatch(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	if err := c.postBunches(ctx, res.ID, res.UpdateID, jobs, o); err != nil {
		c.abandon(res.ID)
		return nil, fmt.Errorf("add jobs to batch %d: %w", res.ID, err)
	}
	if _, err := c.CommitUpdate(ctx, res.ID, res.UpdateID); err != nil {
		return nil, fmt.Errorf("commit batch %d: %w", res.ID, err)
	}
	return c.GetBatch(ctx, res.ID)
}

// postBunches posts every entry of jobs to an open update, Concurrency
// bunches at a time, and stops at the first error.
func (c *Client) postBunches(ctx context.Context, batch, update int64, jobs JobSource, o SubmitOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		mu.Unlock()
	}
	n := jobs.Len()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range work {
				bunch := jobs.Entries(lo, min(lo+o.BunchSize, n))
				if err := validateJobs(bunch, lo); err != nil {
					fail(err)
					continue
				}
				if err := c.AddJobs(ctx, batch, update, bunch); err != nil {
					fail(err)
				}
			}
		}()
	}
send:
	for lo := 0; lo < n; lo += o.BunchSize {
		select {
		case work <- lo:
		case <-ctx.Done():
			break send
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// abandon cancels a batch whose submission failed half-way, so it does not
// stay open with an update that will never be committed. It is best
// effort: the caller reports the submission's own error.
func (c *Client) abandon(batch int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.CancelBatch(ctx, batch)
}
