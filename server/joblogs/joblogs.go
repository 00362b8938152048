// Package joblogs keeps jobs' output logs as chunks in a blob store (the
// local disk by default, a file://, gs:// or s3:// URL otherwise). It is
// not the Raft log (server/boltlog.go).
package joblogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	"github.com/drover-sched/drover/internal/blobs"
)

// Store keeps job logs in a blob store. Workers upload a log in chunks
// while the job runs (so it can be read live) and a last one when it ends;
// a log is the concatenation of its chunks in sequence order. Chunks are
// separate objects because blob stores cannot append.
type Store struct {
	bucket *blob.Bucket
	// dir is the store's directory when it is one on the local disk.
	dir  string
	used usage
}

// Open opens the store at a gocloud.dev/blob URL, or a directory on
// the local disk when url is empty.
func Open(ctx context.Context, url, dir string) (*Store, error) {
	var b *blob.Bucket
	var err error
	if url == "" {
		b, err = fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite, DirFileMode: 0o700})
	} else {
		b, err = blobs.Open(ctx, url)
	}
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	l := &Store{bucket: b}
	if url == "" {
		l.dir = dir
	}
	if err := l.countHeld(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return l, nil
}

// Close releases the store.
func (l *Store) Close() error { return l.bucket.Close() }

func logPrefix(batch uint64, job uint32, attempt int) string {
	return fmt.Sprintf("%d/%d/%d/", batch, job, attempt)
}

// PutChunk stores chunk seq of an attempt's log of a batch. Writing the
// same chunk again replaces it, so uploads can be retried. It counts
// nothing: the caller reserved the bytes it adds (Reserve) before.
func (l *Store) PutChunk(ctx context.Context, batch uint64, job uint32, attempt, seq int, data []byte) error {
	key := chunkKey(batch, job, attempt, seq)
	if err := l.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "text/plain"}); err != nil {
		return fmt.Errorf("store log chunk %s: %w", key, err)
	}
	return nil
}

func chunkKey(batch uint64, job uint32, attempt, seq int) string {
	return fmt.Sprintf("%s%08d", logPrefix(batch, job, attempt), seq)
}

// truncatedKey names the note that an attempt's log was cut.
func truncatedKey(batch uint64, job uint32, attempt int) string {
	return logPrefix(batch, job, attempt) + "truncated"
}

// Truncate ends an attempt's log at chunk seq: what of the chunk was kept
// (kept), then a line saying why, so whoever reads the log sees where and
// why it was cut; a note keeps the reason for Truncated. Like PutChunk it
// counts nothing: the caller reserved len(kept) + len(TruncationLine).
func (l *Store) Truncate(ctx context.Context, batch uint64, job uint32, attempt, seq int, kept []byte, reason string) error {
	last := append(append([]byte(nil), kept...), TruncationLine(reason)...)
	if err := l.PutChunk(ctx, batch, job, attempt, seq, last); err != nil {
		return err
	}
	if err := l.bucket.WriteAll(ctx, truncatedKey(batch, job, attempt), []byte(reason), nil); err != nil {
		return fmt.Errorf("note the truncation of a log: %w", err)
	}
	return nil
}

// TruncationLine is what a log cut by a server ends with.
func TruncationLine(reason string) string {
	return "\n[drover: log truncated: " + reason + "]\n"
}

// Truncated returns why an attempt's log was cut by this server ("": it
// was not).
func (l *Store) Truncated(ctx context.Context, batch uint64, job uint32, attempt int) (string, error) {
	b, err := l.bucket.ReadAll(ctx, truncatedKey(batch, job, attempt))
	switch {
	case gcerrors.Code(err) == gcerrors.NotFound:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read a log's truncation note: %w", err)
	}
	return string(b), nil
}

// Index returns the sizes of the chunks of an attempt's log held in this
// store, by sequence number. It reads no chunk.
func (l *Store) Index(ctx context.Context, batch uint64, job uint32, attempt int) (map[int]int64, error) {
	if l.dir != "" {
		return l.indexDir(batch, job, attempt)
	}
	return l.index(ctx, batch, job, attempt)
}

// indexDir is Index for a store in a local directory. It reads the
// directory itself rather than listing the bucket: a chunk being written
// is a temporary file beside the chunks, which the write renames, and a
// bucket listing that lists it and then reads its size fails ("lstat
// ….tmp: no such file or directory"). Here a name that is not a sequence
// number is never read, and a chunk deleted under the listing is left out.
// (fileblob keeps a key of digits and slashes as the same path.)
func (l *Store) indexDir(batch uint64, job uint32, attempt int) (map[int]int64, error) {
	out := map[int]int64{}
	entries, err := os.ReadDir(filepath.Join(l.dir, filepath.FromSlash(logPrefix(batch, job, attempt))))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list log chunks: %w", err)
	}
	for _, e := range entries {
		seq, err := strconv.Atoi(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list log chunks: %w", err)
		}
		out[seq] = info.Size()
	}
	return out, nil
}

func (l *Store) index(ctx context.Context, batch uint64, job uint32, attempt int) (map[int]int64, error) {
	out := map[int]int64{}
	prefix := logPrefix(batch, job, attempt)
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list log chunks: %w", err)
		}
		seq, err := strconv.Atoi(strings.TrimPrefix(obj.Key, prefix))
		if err != nil {
			continue
		}
		out[seq] = obj.Size
	}
}

// CopyChunk streams one chunk to w.
func (l *Store) CopyChunk(ctx context.Context, w io.Writer, batch uint64, job uint32, attempt, seq int) (int64, error) {
	key := chunkKey(batch, job, attempt, seq)
	r, err := l.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return 0, fmt.Errorf("log chunk %s: %w", key, ErrNoChunk)
		}
		return 0, fmt.Errorf("read log chunk %s: %w", key, err)
	}
	defer r.Close()
	return io.Copy(w, r)
}

// ErrNoChunk means a chunk is not in this store.
var ErrNoChunk = errors.New("no such chunk")

// Seqs returns the sequence numbers of an index in order.
func Seqs(index map[int]int64) []int {
	seqs := make([]int, 0, len(index))
	for seq := range index {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	return seqs
}
