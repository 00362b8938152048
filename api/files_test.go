package api

import (
	"strings"
	"testing"
	"time"
)

func TestCleanJobPath(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"/io/ref.fa", "ref.fa", ""},
		{"ref.fa", "ref.fa", ""},
		{"./a//b/c.txt", "a/b/c.txt", ""},
		{"/io/sub/dir/x", "sub/dir/x", ""},
		{"/io", "", "the job's directory itself"},
		{"", "", "no path"},
		{"/etc/passwd", "", "an absolute path is under /io"},
		{"/iox/a", "", "an absolute path is under /io"},
		{"a/../../b", "", "leaves the job's directory"},
		{"/io/../etc", "", "leaves the job's directory"},
		{"a\x00b", "", "NUL"},
		{strings.Repeat("a", MaxPathBytes+1), "", "the limit is 1024"},
	} {
		got, err := CleanJobPath(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q %v, want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

func TestValidateFileURL(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"gs://bucket/ref/hg38.fa", ""},
		{"file:///data/in/a.txt", ""},
		{"gs://bucket/sample-$DROVER_INDEX.fq", ""},
		{"gs://bucket", "names no object"},
		{"gs://bucket/", "names no object"},
		{"file://host/a", "names no file"},
		{"file:///data/dir/", "names no file"},
		{"ftp://x/y", "not one of gs, s3 or file"},
		{"mem://x/y", "not one of gs, s3 or file"},
		{"", "no URL"},
		{"gs://b/" + strings.Repeat("k", MaxURLBytes), "the limit is 2048"},
	} {
		err := ValidateFileURL(c.in)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, want %q", c.in, err, c.err)
		}
	}
}

func TestJobSpecRun(t *testing.T) {
	base := func() JobSpec { return JobSpec{JobID: 1, Command: []string{"true"}} }
	for _, c := range []struct {
		name string
		edit func(*JobSpec)
		err  string
	}{
		{"container", func(s *JobSpec) { s.Image = "reg.example.com/a/b:1"; s.Network = NetworkHost }, ""},
		{"bad image", func(s *JobSpec) { s.Image = "UPPER CASE" }, "not an image reference"},
		{"long image", func(s *JobSpec) { s.Image = "r/" + strings.Repeat("a", MaxImageRef) }, "limit is 512"},
		{"process on the host network", func(s *JobSpec) { s.Network = NetworkHost }, ""},
		{"process on a bridge", func(s *JobSpec) { s.Network = NetworkBridge }, ""},
		{"container without network", func(s *JobSpec) { s.Image = "busybox:1"; s.Network = NetworkNone }, ""},
		{"unknown network", func(s *JobSpec) { s.Image = "busybox:1"; s.Network = "nat" }, `network is "nat"; it is "bridge"`},
		{"long unknown network", func(s *JobSpec) { s.Network = strings.Repeat("n", 1<<20) }, `network is "nnnn`},
		{"files", func(s *JobSpec) {
			s.Inputs = []InputFile{{Name: "a", Source: "gs://b/a", Path: "a"}, {Name: "b", Source: "gs://b/b", Path: "/io/b"}}
			s.Outputs = []OutputFile{{Name: "a", Path: "out", Destination: "gs://b/out"}}
		}, ""},
		{"input twice", func(s *JobSpec) {
			s.Inputs = []InputFile{{Name: "a", Source: "gs://b/a", Path: "a"}, {Name: "a", Source: "gs://b/b", Path: "b"}}
		}, "named twice"},
		{"same path", func(s *JobSpec) {
			s.Inputs = []InputFile{{Name: "a", Source: "gs://b/a", Path: "/io/a"}, {Name: "b", Source: "gs://b/b", Path: "a"}}
		}, "used by another input"},
		{"too many", func(s *JobSpec) {
			for i := 0; i <= MaxFiles; i++ {
				s.Outputs = append(s.Outputs, OutputFile{Name: "o", Path: "p", Destination: "gs://b/o"})
			}
		}, "the limit is 64 of each"},
		{"bad name", func(s *JobSpec) { s.Inputs = []InputFile{{Name: "a b", Source: "gs://b/a", Path: "a"}} }, "input name"},
	} {
		s := base()
		c.edit(&s)
		err := s.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
}

func TestUsageValidate(t *testing.T) {
	ok := Usage{CPUSeconds: 7.5, PeakMemory: 1 << 30, BytesIn: 10, BytesOut: 20, InputSeconds: 1}
	if err := ok.Validate(2, 8<<30, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u   Usage
		err string
	}{
		{Usage{CPUSeconds: 100}, "more than the instance's 2 cores over the attempt's 5s (limit 70)"},
		{Usage{CPUSeconds: -1}, "cpu_seconds is -1"},
		{Usage{PeakMemory: 9 << 30}, "peak_memory"},
		{Usage{BytesIn: MaxUsageBytes + 1}, "bytes_in"},
		{Usage{OutputSeconds: MaxTimeoutSeconds + 1}, "output_seconds"},
	} {
		if err := c.u.Validate(2, 8<<30, 5*time.Second); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want %q", c.u, err, c.err)
		}
	}
}
