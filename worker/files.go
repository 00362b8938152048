package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/blobs"
)

// files copies jobs' input files into their directories and their output
// files out, through object storage (gocloud.dev/blob). The worker does
// this as itself, so it checks every name a job gave it: an output is
// read only from inside the job's directory (a job that made it a symlink
// to a secret uploads nothing), and a file:// URL only names a file under
// a directory the operator allowed.
type files struct {
	roots []string // directories file:// URLs may name, symlinks resolved

	mu      sync.Mutex
	buckets map[string]*blob.Bucket // open buckets by URL, kept: a gs client is costly to make
}

func newFiles(roots []string) (*files, error) {
	f := &files{buckets: map[string]*blob.Bucket{}}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("file URL root %s: %w", r, err)
		}
		f.roots = append(f.roots, abs)
	}
	return f, nil
}

// close closes the buckets opened so far.
func (f *files) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, b := range f.buckets {
		b.Close()
		delete(f.buckets, k)
	}
}

// fileError is the message of an input or output that could not be
// copied: the job ends in error with it.
type fileError struct {
	kind, name, url string
	err             error
}

func (e *fileError) Error() string {
	return fmt.Sprintf("%s %q (%s): %v", e.kind, e.name, e.url, e.err)
}

func (e *fileError) Unwrap() error { return e.err }

// expandFile expands the job's variables in a file's URL and path and
// checks the result again: a variable may hold anything.
// env is KEY=value pairs, the last of a key winning.
func expandFile(rawURL, p string, env []string) (string, string, error) {
	get := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	u := os.Expand(rawURL, get)
	if err := api.ValidateFileURL(u); err != nil {
		return "", "", err
	}
	rel, err := api.CleanJobPath(os.Expand(p, get))
	if err != nil {
		return "", "", err
	}
	return u, rel, nil
}

// open opens the bucket of an object URL and returns it with the object's
// key. file:// URLs must lie under an allowed root; output buckets of
// file:// URLs make their directory.
func (f *files) open(ctx context.Context, objectURL string, output bool) (*blob.Bucket, string, error) {
	bucketURL, key, err := blobs.Split(objectURL)
	if err != nil {
		return nil, "", err
	}
	if strings.HasPrefix(objectURL, "file://") {
		u, _ := url.Parse(objectURL)
		if err := f.allowed(u.Path, output); err != nil {
			return nil, "", err
		}
		// No metadata sidecar files next to the data; temporary files in
		// the directory itself, so the last rename stays on one disk.
		bucketURL += "?metadata=skip&no_tmp_dir=1"
		if output {
			bucketURL += "&create_dir=1"
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.buckets[bucketURL]; ok {
		return b, key, nil
	}
	b, err := blobs.Open(ctx, bucketURL)
	if err != nil {
		return nil, "", err
	}
	f.buckets[bucketURL] = b
	return b, key, nil
}

// allowed checks that a file:// path is under an allowed root once its
// symlinks are resolved (for an output, those of the deepest directory
// that exists).
func (f *files) allowed(p string, output bool) error {
	if len(f.roots) == 0 {
		return errors.New("this worker reads and writes no file:// URLs: its operator allows directories with -file-url-roots")
	}
	resolved := filepath.Clean(p)
	probe := resolved
	for {
		r, err := filepath.EvalSymlinks(probe)
		if err == nil {
			resolved = filepath.Join(r, strings.TrimPrefix(resolved, probe))
			break
		}
		if !output || !errors.Is(err, os.ErrNotExist) || probe == "/" {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no such object: %s does not exist", p)
			}
			return err
		}
		probe = filepath.Dir(probe)
	}
	for _, root := range f.roots {
		if strings.HasPrefix(resolved, root+string(filepath.Separator)) {
			return nil
		}
	}
	return fmt.Errorf("%s is not under a directory this worker allows for file:// URLs (%s)", p, strings.Join(f.roots, ", "))
}

// fetch copies the object at src to rel inside dir (a fresh job
// directory the job has not run in yet), making the file's parents, all
// owned by uid and gid when they are not 0. It returns the bytes copied.
func (f *files) fetch(ctx context.Context, src, dir, rel string, uid, gid int) (int64, error) {
	b, key, err := f.open(ctx, src, false)
	if err != nil {
		return 0, err
	}
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return 0, describeBlobError(err)
	}
	defer r.Close()
	dst := filepath.Join(dir, rel)
	if err := mkdirOwned(dir, filepath.Dir(rel), uid, gid); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, describeBlobError(err)
	}
	if uid != 0 || gid != 0 {
		if err := os.Lchown(dst, uid, gid); err != nil {
			return n, err
		}
	}
	return n, nil
}

// store copies the regular file at rel inside dir to the object dst. The
// file is opened without leaving dir, whatever symlinks the job made.
func (f *files) store(ctx context.Context, dir, rel, dst string) (int64, error) {
	in, err := securejoin.OpenInRoot(dir, rel)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("the job did not write %s", rel)
		}
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file (%s)", rel, fi.Mode().Type())
	}
	// OpenInRoot gives an O_PATH handle; reopen it for reading through
	// /proc, which cannot follow anything new.
	r, err := securejoin.Reopen(in, os.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	b, key, err := f.open(ctx, dst, true)
	if err != nil {
		return 0, err
	}
	w, err := b.NewWriter(ctx, key, nil)
	if err != nil {
		return 0, describeBlobError(err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		_ = w.Close()
		return n, describeBlobError(err)
	}
	if err := w.Close(); err != nil {
		return n, describeBlobError(err)
	}
	return n, nil
}

// mkdirOwned makes rel's directories under dir, each owned by uid and gid
// when they are not 0.
func mkdirOwned(dir, rel string, uid, gid int) error {
	if rel == "." || rel == "" {
		return nil
	}
	cur := dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return err
		}
		if uid != 0 || gid != 0 {
			if err := os.Lchown(cur, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// describeBlobError says what a blob error means for a person.
func describeBlobError(err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("no such object: %w", err)
	case gcerrors.PermissionDenied:
		return fmt.Errorf("access denied to the worker's credentials: %w", err)
	}
	return err
}
