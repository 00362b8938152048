package logstore

import (
	"bytes"
	"context"
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
	chunks, err := st.Chunks(ctx, 7, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteChunks(&buf, chunks); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "abc" {
		t.Fatalf("log %q, want abc (sequence 1, 2, 10)", buf.String())
	}
	if none, err := st.Chunks(ctx, 7, 4, 1); err != nil || len(none) != 0 {
		t.Fatalf("log of a job that wrote nothing: %v, %v", none, err)
	}
}
