package logstore

import (
	"bytes"
	"context"
	"errors"
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
