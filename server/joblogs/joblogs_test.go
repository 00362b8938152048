package joblogs

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestChunksComeBackInSequenceOrder(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Chunks arrive out of order, one is retried with the same bytes, and
	// another attempt's log must not leak in.
	for _, c := range []struct {
		attempt, seq int
		data         string
	}{{1, 10, "c"}, {1, 2, "b"}, {1, 1, "a"}, {1, 2, "b"}, {2, 1, "other"}} {
		if err := st.PutChunk(ctx, 7, 3, c.attempt, c.seq, []byte(c.data)); err != nil {
			t.Fatal(err)
		}
	}
	index, err := st.Index(ctx, 7, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, seq := range Seqs(index) {
		n, err := st.CopyChunk(ctx, &buf, 7, 3, 1, seq)
		if err != nil || n != index[seq] {
			t.Fatalf("chunk %d: %d bytes (index says %d), %v", seq, n, index[seq], err)
		}
	}
	if buf.String() != "abc" {
		t.Fatalf("log %q, want abc (sequence 1, 2, 10)", buf.String())
	}
	if none, err := st.Index(ctx, 7, 4, 1); err != nil || len(none) != 0 {
		t.Fatalf("log of a job that wrote nothing: %v, %v", none, err)
	}
	if _, err := st.CopyChunk(ctx, &buf, 7, 3, 1, 3); !errors.Is(err, ErrNoChunk) {
		t.Fatalf("a chunk that is not there: %v", err)
	}
}

// TestHeldBytes: the store counts what it holds per batch and per billing
// project as chunks come and are replaced; reopened, it counts each batch
// from what it lists, and its projects once told whose batches they are.
func TestHeldBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(batch uint64, project string, seq int, n int, replaced int64) {
		t.Helper()
		st.Reserve(batch, project, func(int64, int64, bool) int64 { return int64(n) - replaced })
		if err := st.PutChunk(ctx, batch, 1, 1, seq, bytes.Repeat([]byte("x"), n)); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "a", 0, 100, 0)
	put(1, "a", 1, 50, 0)
	put(1, "a", 1, 70, 50) // a retried chunk, longer
	put(2, "a", 0, 10, 0)
	put(3, "b", 0, 5, 0)
	check := func(batch uint64, project string, wantBatch, wantProject int64, wantKnown bool) {
		t.Helper()
		b, p, known := st.Held(batch, project)
		if b != wantBatch || p != wantProject || known != wantKnown {
			t.Fatalf("held of batch %d / project %s: %d, %d, known %v; want %d, %d, %v", batch, project, b, p, known, wantBatch, wantProject, wantKnown)
		}
	}
	check(1, "a", 170, 180, true)
	check(3, "b", 5, 5, true)
	marker := int64(len("yy" + TruncationLine("over the limit")))
	st.Reserve(2, "a", func(int64, int64, bool) int64 { return marker })
	if err := st.Truncate(ctx, 2, 1, 1, 1, []byte("yy"), "over the limit"); err != nil {
		t.Fatal(err)
	}
	if why, err := st.Truncated(ctx, 2, 1, 1); err != nil || why != "over the limit" {
		t.Fatalf("truncated: %q, %v", why, err)
	}
	index, _ := st.Index(ctx, 2, 1, 1)
	var log bytes.Buffer
	for _, seq := range Seqs(index) {
		if _, err := st.CopyChunk(ctx, &log, 2, 1, 1, seq); err != nil {
			t.Fatal(err)
		}
	}
	if want := strings.Repeat("x", 10) + "yy" + TruncationLine("over the limit"); log.String() != want {
		t.Fatalf("a truncated log reads %q, want %q", log.String(), want)
	}
	check(2, "a", 10+marker, 180+marker, true)
	st.Release(2, "a", 1)
	check(2, "a", 9+marker, 179+marker, true)
	st.Release(2, "a", -1)
	st.Close()

	st, err = Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check(1, "a", 170, 0, false) // a's batches are not attributed yet
	st.Attribute(func(b uint64) string { return map[uint64]string{1: "a", 2: "a", 3: "b"}[b] })
	check(1, "a", 170, 180+marker, true)
	check(3, "b", 5, 5, true)
}

// TestReserveIsOneStep: uploads that check a quota and count their bytes
// together, from many goroutines at once, never take more than the quota
// between them; checked then counted apart, they would.
func TestReserveIsOneStep(t *testing.T) {
	st, err := Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const quota, chunk = 1000, 100
	var wg sync.WaitGroup
	var granted atomic.Int64
	for range 64 {
		wg.Go(func() {
			n := st.Reserve(1, "p", func(_, held int64, _ bool) int64 {
				runtime.Gosched() // let the others check too, were it two steps
				return max(0, min(chunk, quota-held))
			})
			granted.Add(n)
		})
	}
	wg.Wait()
	if _, held, _ := st.Held(1, "p"); held != quota || granted.Load() != quota {
		t.Fatalf("64 uploads of %d bytes under a quota of %d: %d granted, %d held", chunk, quota, granted.Load(), held)
	}
}

// A log is read while its job writes it: listing a directory store meets
// the temporary file of a chunk being written, which the write renames
// away before the listing reads its size. Index must not fail on that
// (it did: "list log chunks: ... lstat ....tmp: no such file or
// directory", seen by a Nomad client following a live log).
func TestIndexWhileChunksAreWritten(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := w * 1_000_000; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := st.PutChunk(ctx, 1, 1, 1, seq%10+w*10, []byte("tick\n")); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		}()
	}
	for i := 0; i < 1500 || written.Load() < 1500; i++ {
		if _, err := st.Index(ctx, 1, 1, 1); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("listing %d (after %d writes): %v", i, written.Load(), err)
		}
	}
	close(stop)
	wg.Wait()
}
