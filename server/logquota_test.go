package server

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/joblogs"
)

// TestLogQuotas: a worker uploading a job's log past its batch's limit or
// its billing project's quota is refused (413 naming the limit); the log
// ends with a line saying where and why it was cut, and reads with the
// truncation header; other batches of the project are held to what is left.
func TestLogQuotas(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.MaxLogBytesPerBatch = 1000 })
	ctx := context.Background()
	w := newSimWorker(t, tc, "sim-log", 16)
	submit := func() (int64, api.AttemptRef) {
		t.Helper()
		b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		res := w.sync(5 * time.Second)
		if len(res.Assign) != 1 || res.Assign[0].BatchID != b.Batch.ID {
			t.Fatalf("assigned %+v", res.Assign)
		}
		w.known = append(w.known, res.Assign[0].AttemptRef)
		return b.Batch.ID, res.Assign[0].AttemptRef
	}
	readLog := func(batch int64) (string, string) {
		t.Helper()
		l, err := tc.admin.OpenJobLog(ctx, batch, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		data, err := io.ReadAll(l)
		if err != nil {
			t.Fatal(err)
		}
		return string(data), l.Truncated
	}
	b1, a1 := submit()
	if err := w.c.Workers().UploadLogChunk(ctx, a1, 0, []byte(strings.Repeat("a", 600))); err != nil {
		t.Fatal(err)
	}
	err := w.c.Workers().UploadLogChunk(ctx, a1, 1, []byte(strings.Repeat("b", 600)))
	if !api.IsStatus(err, 413) || !strings.Contains(err.Error(), "max_log_bytes_per_batch") {
		t.Fatalf("a chunk past the batch's limit: %v", err)
	}
	// What of the chunk fits is kept, then a line says why the log ends.
	log, why := readLog(b1)
	if want := strings.Repeat("a", 600) + strings.Repeat("b", 400) + joblogs.TruncationLine(why); log != want || !strings.Contains(why, "max_log_bytes_per_batch") {
		t.Fatalf("the cut log: %d bytes ending %q, header %q", len(log), log[max(0, len(log)-120):], why)
	}
	// Another chunk of the same attempt is refused without a second line.
	if err := w.c.Workers().UploadLogChunk(ctx, a1, 2, []byte("c")); !api.IsStatus(err, 413) {
		t.Fatalf("a chunk after the cut: %v", err)
	}
	if again, _ := readLog(b1); again != log {
		t.Fatalf("the log changed after it was cut: %q", again[600:])
	}

	// The project's quota: 3,000 bytes, of which the first batch holds
	// 1,000 and its marker line.
	held := int64(len(log))
	if _, err := tc.admin.SetLogQuota(ctx, "default", 3000); err != nil {
		t.Fatal(err)
	}
	b2, a2 := submit()
	if err := w.c.Workers().UploadLogChunk(ctx, a2, 0, []byte(strings.Repeat("d", 900))); err != nil {
		t.Fatal(err)
	}
	b3, a3 := submit()
	err = w.c.Workers().UploadLogChunk(ctx, a3, 0, []byte(strings.Repeat("e", 1200)))
	if !api.IsStatus(err, 413) || !strings.Contains(err.Error(), "log quota") {
		t.Fatalf("a chunk past the project's quota: %v", err)
	}
	room := 3000 - held - 900
	if log, why := readLog(b3); !strings.Contains(why, `billing project default`) || log != strings.Repeat("e", int(room))+joblogs.TruncationLine(why) {
		t.Fatalf("a log cut at its first chunk: %q (header %q), want %d bytes of it kept", log, why, room)
	}
	if log, why := readLog(b2); why != "" || log != strings.Repeat("d", 900) {
		t.Fatalf("a log within the quota: %d bytes, header %q", len(log), why)
	}

	// Uploads arriving together share what is left of the quota: 2,500
	// bytes for 8 chunks of 1,000 at once keep 2,500 bytes between them,
	// and a marker line each that was cut.
	held += 900 + int64(len(mustLog(readLog(b3))))
	if _, err := tc.admin.SetLogQuota(ctx, "default", held+2500); err != nil {
		t.Fatal(err)
	}
	var batches []int64
	var attempts []api.AttemptRef
	for range 8 {
		b, a := submit()
		batches, attempts = append(batches, b), append(attempts, a)
	}
	var wg sync.WaitGroup
	for _, a := range attempts {
		wg.Go(func() { w.c.Workers().UploadLogChunk(ctx, a, 0, []byte(strings.Repeat("f", 1000))) })
	}
	wg.Wait()
	kept, cut := 0, 0
	for _, b := range batches {
		log, why := readLog(b)
		if why != "" {
			cut++
			log = strings.TrimSuffix(log, joblogs.TruncationLine(why))
		}
		kept += len(log)
	}
	if kept != 2500 || cut < 6 {
		t.Fatalf("8 chunks of 1,000 bytes at once with 2,500 left under the quota: %d bytes kept, %d logs cut", kept, cut)
	}

	// Only an admin sets a quota: a project's manager may not raise it.
	m, err := tc.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.admin.SetRole(ctx, "default", "m", "manager"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(tc.url, m.Token).SetLogQuota(ctx, "default", 1<<40); !api.IsStatus(err, 403) {
		t.Fatalf("a manager raising the project's log quota: %v", err)
	}
}

// mustLog is a log without the header readLog returns with it.
func mustLog(log, _ string) string { return log }
