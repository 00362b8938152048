package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"
)

// LogStore keeps job logs in a blob store. Workers upload a log in chunks
// while the job runs (so it can be read live) and a last one when it ends;
// a log is the concatenation of its chunks in sequence order. Chunks are
// separate objects because blob stores cannot append.
type LogStore struct {
	bucket *blob.Bucket
}

// OpenLogStore opens the store at a gocloud.dev/blob URL, or a directory on
// the local disk when url is empty.
func OpenLogStore(ctx context.Context, url, dir string) (*LogStore, error) {
	var b *blob.Bucket
	var err error
	if url == "" {
		b, err = fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite, DirFileMode: 0o700})
	} else {
		b, err = blob.OpenBucket(ctx, url)
	}
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	return &LogStore{bucket: b}, nil
}

// Close releases the store.
func (l *LogStore) Close() error { return l.bucket.Close() }

func logPrefix(batch uint64, job uint32, attempt int) string {
	return fmt.Sprintf("%d/%d/%d/", batch, job, attempt)
}

// PutChunk stores chunk seq of an attempt's log. Writing the same chunk
// again replaces it, so uploads can be retried.
func (l *LogStore) PutChunk(ctx context.Context, batch uint64, job uint32, attempt, seq int, data []byte) error {
	key := fmt.Sprintf("%s%08d", logPrefix(batch, job, attempt), seq)
	if err := l.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "text/plain"}); err != nil {
		return fmt.Errorf("store log chunk %s: %w", key, err)
	}
	return nil
}

// Copy writes an attempt's log to w. It reports false when nothing was
// uploaded for the attempt.
func (l *LogStore) Copy(ctx context.Context, batch uint64, job uint32, attempt int, w io.Writer) (bool, error) {
	var keys []string
	it := l.bucket.List(&blob.ListOptions{Prefix: logPrefix(batch, job, attempt)})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("list log chunks: %w", err)
		}
		keys = append(keys, obj.Key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		r, err := l.bucket.NewReader(ctx, key, nil)
		if gcerrors.Code(err) == gcerrors.NotFound {
			continue
		}
		if err != nil {
			return true, fmt.Errorf("read log chunk %s: %w", key, err)
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return true, fmt.Errorf("read log chunk %s: %w", key, err)
		}
	}
	return len(keys) > 0, nil
}
