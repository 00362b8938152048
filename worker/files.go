package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// this for the job's billing project: each URL must lie under one of the
// project's storage prefixes the servers granted the attempt
// (api.Assignment.Storage), and is reached with that prefix's credentials
// (the project's own) or, for a prefix without any, the worker's
// identity. It checks every name a job gave it: an output is read only
// from inside the job's directory (a job that made it a symlink to a
// secret uploads nothing), and a file:// URL only names a file under a
// directory the operator allowed and, symlinks resolved, under its
// prefix.
type files struct {
	roots []string // directories file:// URLs may name, symlinks resolved

	mu sync.Mutex
	// buckets are the buckets opened with the worker's own identity, by
	// URL and settings, kept: a gs client is costly to make. Buckets
	// opened with a project's credentials belong to one attempt
	// (attemptFiles) and close with it.
	buckets map[string]*blob.Bucket
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

// attemptFiles is one attempt's access to storage: the prefixes it was
// granted and the buckets it opened with their credentials, which close
// when the attempt ends (close): credentials live in the worker's memory
// only while an attempt of their project runs, and never where the job
// can read them.
type attemptFiles struct {
	f      *files
	grants []api.StorageGrant
	set    api.PrefixSet
	owned  map[string]*blob.Bucket // by grant index and bucket
}

// forAttempt gives an attempt its grants.
func (f *files) forAttempt(grants []api.StorageGrant) *attemptFiles {
	prefixes := make([]string, len(grants))
	for i, g := range grants {
		prefixes[i] = g.Prefix
	}
	return &attemptFiles{f: f, grants: grants, set: api.NewPrefixSet(prefixes), owned: map[string]*blob.Bucket{}}
}

// close closes the buckets opened with the attempt's credentials.
func (af *attemptFiles) close() {
	for k, b := range af.owned {
		b.Close()
		delete(af.owned, k)
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
// checks the result again: a variable may hold anything (a query that
// would steer the driver, a path that leaves the job's directory).
// env is KEY=value pairs, the last of a key winning.
func expandFile(rawURL, p string, env []string) (string, string, error) {
	u := api.ExpandJobVars(rawURL, env)
	if err := api.ValidateFileURL(u); err != nil {
		return "", "", err
	}
	rel, err := api.CleanJobPath(api.ExpandJobVars(p, env))
	if err != nil {
		return "", "", err
	}
	return u, rel, nil
}

// open opens the bucket of an object URL and returns it with the object's
// key. The URL must lie under a prefix the attempt was granted; file://
// URLs must also lie under an allowed root and, symlinks resolved, under
// the prefix; output buckets of file:// URLs make their directory.
func (af *attemptFiles) open(ctx context.Context, objectURL string, output bool) (*blob.Bucket, string, error) {
	at, err := af.set.Match(objectURL)
	if err != nil {
		return nil, "", err
	}
	if at < 0 {
		granted := make([]string, len(af.grants))
		for i, g := range af.grants {
			granted[i] = g.Prefix
		}
		return nil, "", fmt.Errorf("%.200q is under none of the storage prefixes of the job's billing project that this attempt was granted (%s): a job reads and writes only there, and an admin may have removed the prefix since the job was submitted (drover billing-project storage list)",
			objectURL, strings.Join(granted, ", "))
	}
	g := af.grants[at]
	if g.Error != "" {
		return nil, "", fmt.Errorf("storage prefix %s: %s", g.Prefix, g.Error)
	}
	scheme, bucket, key, err := blobs.Split(objectURL)
	if err != nil {
		return nil, "", err
	}
	acc := blobs.Access{}
	if c := g.Credentials; c != nil {
		acc.GCSServiceAccountKey = []byte(c.GCSServiceAccountKey)
		acc.S3AccessKeyID, acc.S3SecretAccessKey, acc.S3SessionToken = c.S3AccessKeyID, c.S3SecretAccessKey, c.S3SessionToken
	}
	if s3 := g.S3; s3 != nil {
		acc.S3Endpoint, acc.S3Region, acc.S3PathStyle = s3.Endpoint, s3.Region, s3.PathStyle
	}
	if scheme == "file" {
		if err := af.f.allowed(bucket+"/"+key, strings.TrimPrefix(g.Prefix, "file://"), output); err != nil {
			return nil, "", err
		}
		acc.CreateDir = output
	}
	cacheKey := fmt.Sprintf("%s://%s\x00%s\x00%s\x00%t\x00%t", scheme, bucket, acc.S3Endpoint, acc.S3Region, acc.S3PathStyle, acc.CreateDir)
	if acc.Own() {
		k := fmt.Sprintf("%d\x00%s", at, cacheKey)
		if b, ok := af.owned[k]; ok {
			return b, key, nil
		}
		b, err := blobs.OpenBucket(ctx, scheme, bucket, acc)
		if err != nil {
			return nil, "", err
		}
		af.owned[k] = b
		return b, key, nil
	}
	af.f.mu.Lock()
	defer af.f.mu.Unlock()
	if b, ok := af.f.buckets[cacheKey]; ok {
		return b, key, nil
	}
	b, err := blobs.OpenBucket(ctx, scheme, bucket, acc)
	if err != nil {
		return nil, "", err
	}
	af.f.buckets[cacheKey] = b
	return b, key, nil
}

// allowed checks that a file:// path is under an allowed root, and under
// its storage prefix's directory, once symlinks are resolved (for an
// output, those of the deepest directory that exists): a link in the
// bucket leads nowhere another project's prefix or the worker's files
// are.
func (f *files) allowed(p, prefixDir string, output bool) error {
	if len(f.roots) == 0 {
		return errors.New("this worker reads and writes no file:// URLs: its operator allows directories with -file-url-roots")
	}
	resolved, err := resolvePath(p, output)
	if err != nil {
		return err
	}
	inRoot := false
	for _, root := range f.roots {
		if strings.HasPrefix(resolved, root+string(filepath.Separator)) {
			inRoot = true
		}
	}
	if !inRoot {
		return fmt.Errorf("%s is not under a directory this worker allows for file:// URLs (%s)", p, strings.Join(f.roots, ", "))
	}
	prefix, err := resolvePath(prefixDir, true)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(resolved, prefix+string(filepath.Separator)) {
		return fmt.Errorf("%s leads out of its storage prefix %s through a symbolic link (to %s)", p, prefixDir, resolved)
	}
	return nil
}

// resolvePath resolves p's symlinks; with partial, only those of its
// deepest part that exists (the rest is joined as it is).
func resolvePath(p string, partial bool) (string, error) {
	resolved := filepath.Clean(p)
	probe := resolved
	for {
		r, err := filepath.EvalSymlinks(probe)
		if err == nil {
			return filepath.Join(r, strings.TrimPrefix(resolved, probe)), nil
		}
		if !partial || !errors.Is(err, os.ErrNotExist) || probe == "/" {
			if errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("no such object: %s does not exist", p)
			}
			return "", err
		}
		probe = filepath.Dir(probe)
	}
}

// fetch copies the object at src to rel inside dir (a fresh job
// directory the job has not run in yet), making the file's parents, all
// owned by uid and gid when they are not 0. It returns the bytes copied.
func (af *attemptFiles) fetch(ctx context.Context, src, dir, rel string, uid, gid int) (int64, error) {
	b, key, err := af.open(ctx, src, false)
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
func (af *attemptFiles) store(ctx context.Context, dir, rel, dst string) (int64, error) {
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
	b, key, err := af.open(ctx, dst, true)
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
		return fmt.Errorf("access denied to the storage prefix's credentials: %w", err)
	}
	return err
}
