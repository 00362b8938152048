package api

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"time"
)

// JobDirMount is where a container job sees its directory, and the prefix
// of absolute input and output paths.
const JobDirMount = "/io"

// FileSchemes are the URL schemes of input and output files.
var FileSchemes = []string{"gs", "s3", "file"}

// validateRun checks what a job runs in (image, network) and the files it
// takes and gives.
func (s *JobSpec) validateRun() error {
	if s.Image != "" {
		if err := ValidateImage(s.Image); err != nil {
			return err
		}
	}
	if err := ValidateNetwork(s.Network); err != nil {
		return err
	}
	if len(s.Inputs) > MaxFiles || len(s.Outputs) > MaxFiles {
		return fmt.Errorf("%d inputs and %d outputs; the limit is %d of each", len(s.Inputs), len(s.Outputs), MaxFiles)
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for _, in := range s.Inputs {
		if err := validateFile("input", in.Name, in.Source, in.Path, names, paths); err != nil {
			return err
		}
	}
	names, paths = map[string]bool{}, map[string]bool{}
	for _, out := range s.Outputs {
		if err := validateFile("output", out.Name, out.Destination, out.Path, names, paths); err != nil {
			return err
		}
	}
	return nil
}

func validateFile(kind, name, rawURL, p string, names, paths map[string]bool) error {
	if err := ValidatePlaceName(kind+" name", name); err != nil {
		return err
	}
	if names[name] {
		return fmt.Errorf("%s %q is named twice", kind, name)
	}
	names[name] = true
	if err := ValidateFileURL(rawURL); err != nil {
		return fmt.Errorf("%s %q: %w", kind, name, err)
	}
	clean, err := CleanJobPath(p)
	if err != nil {
		return fmt.Errorf("%s %q: %w", kind, name, err)
	}
	if paths[clean] {
		return fmt.Errorf("%s %q: path %q is used by another %s", kind, name, p, kind)
	}
	paths[clean] = true
	return nil
}

// ValidateNetwork checks a job's network mode: empty (the default,
// NetworkBridge), NetworkBridge, NetworkNone or NetworkHost.
func ValidateNetwork(mode string) error {
	switch mode {
	case "", NetworkBridge, NetworkNone, NetworkHost:
		return nil
	}
	return fmt.Errorf("network is %.70q; it is %q (the default: a network of its own with NAT to the world, not to its machine), %q (loopback only) or %q (the machine's own)",
		mode, NetworkBridge, NetworkNone, NetworkHost)
}

// CleanJobPath checks the path of an input or output and returns it
// relative to the job's directory: "/io/ref.fa" and "ref.fa" are both
// "ref.fa". It may not leave the directory.
func CleanJobPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("no path: give one relative to the job's directory or under /io")
	}
	if len(p) > MaxPathBytes {
		return "", fmt.Errorf("path is %d bytes; the limit is %d", len(p), MaxPathBytes)
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path holds a NUL byte")
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		if p != JobDirMount && !strings.HasPrefix(p, JobDirMount+"/") {
			return "", fmt.Errorf("path %q: an absolute path is under %s, where the job's directory is", p, JobDirMount)
		}
		rel = strings.TrimPrefix(p, JobDirMount)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q leaves the job's directory", p)
		}
	}
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	if rel == "" {
		return "", fmt.Errorf("path %q is the job's directory itself; name a file in it", p)
	}
	return rel, nil
}

// Validate checks reported usage against the attempt: CPU time no more
// than the instance's cores over the attempt's wall time (plus a minute
// of slack for clocks), peak memory no more than the instance's, bytes
// and times finite and bounded.
func (u *Usage) Validate(cores float64, memory int64, wall time.Duration) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"cpu_seconds", u.CPUSeconds}, {"image_seconds", u.ImageSeconds}, {"input_seconds", u.InputSeconds}, {"output_seconds", u.OutputSeconds}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > MaxTimeoutSeconds {
			return fmt.Errorf("usage %s is %g; it is between 0 and %d", f.name, f.v, MaxTimeoutSeconds)
		}
	}
	if limit := cores*max(wall.Seconds(), 0) + 60; u.CPUSeconds > limit {
		return fmt.Errorf("usage cpu_seconds is %g: more than the instance's %g cores over the attempt's %s (limit %g)", u.CPUSeconds, cores, wall.Round(time.Millisecond), limit)
	}
	if u.PeakMemory < 0 || u.PeakMemory > memory {
		return fmt.Errorf("usage peak_memory is %d bytes; it is between 0 and the instance's memory, %d", u.PeakMemory, memory)
	}
	if u.Memory < 0 || u.Memory > memory {
		return fmt.Errorf("usage memory is %d bytes; it is between 0 and the instance's memory, %d", u.Memory, memory)
	}
	if u.BytesIn < 0 || u.BytesIn > MaxUsageBytes || u.BytesOut < 0 || u.BytesOut > MaxUsageBytes {
		return fmt.Errorf("usage bytes_in %d, bytes_out %d: each is between 0 and %d", u.BytesIn, u.BytesOut, int64(MaxUsageBytes))
	}
	return nil
}
