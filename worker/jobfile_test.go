package worker

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestJobFilesStayInTheJobsDirectory: what the worker writes for a Nomad
// task (its payload and templates, at paths the job's spec names) lands
// under the job's directory, owned by the job's user, whatever the path
// and whatever links are in the way: ".." and absolute paths are refused,
// a link to a file is not written through, and a link to a directory
// outside is not followed (the directory is the worker's, and it is
// emptied between jobs; this holds even if a link were left there).
func TestJobFilesStayInTheJobsDirectory(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	const uid = 4242
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "victim"), filepath.Join(dir, "victim")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../escape", "/etc/escape", "local/../../escape", "out/escape", "out/sub/escape", "victim", "local/../out/escape"} {
		if err := writeJobFile(dir, rel, []byte("x"), 0o644, uid); err == nil {
			t.Errorf("%q was written", rel)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the worker wrote outside the job's directory: %v", ents)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Fatal("the worker wrote beside the job's directory")
	}
	// What may be written is, as the job's user, its new directories too.
	if err := writeJobFile(dir, "local/conf/app.env", []byte("A=1\n"), 0o600, uid); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"local", "local/conf", "local/conf/app.env"} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if owner(fi) != uid {
			t.Errorf("%s is owned by %d, not the job's user", p, owner(fi))
		}
	}
	// An existing file is not replaced.
	if err := writeJobFile(dir, "local/conf/app.env", []byte("B=2\n"), 0o600, uid); err == nil {
		t.Error("an existing file was replaced")
	}
}

func owner(fi os.FileInfo) int {
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}
