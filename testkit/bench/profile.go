package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/drover-sched/drover/testkit/testcluster"
)

// saveOwnProfile writes a CPU profile of the bench process.
func saveOwnProfile(dir string, length time.Duration) {
	_ = os.MkdirAll(dir, 0o755)
	f, err := os.Create(dir + "/bench.cpu.pprof")
	if err != nil {
		return
	}
	defer f.Close()
	if pprof.StartCPUProfile(f) != nil {
		return
	}
	time.Sleep(length)
	pprof.StopCPUProfile()
}

// saveProfile fetches a CPU profile from a server started with
// -debug-pprof.
func saveProfile(s *testcluster.Server, dir string, length time.Duration) {
	saveServerProfile(s, "/debug/pprof/profile?seconds="+strconv.Itoa(max(1, int(length.Seconds()))), fmt.Sprintf("%s/%s.cpu.pprof", dir, s.ID()))
}

// saveServerProfile fetches a profile from a server started with
// -debug-pprof into file.
func saveServerProfile(s *testcluster.Server, path, file string) {
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	resp, err := s.HTTPClient(0).Get(s.URL() + path)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.ReadFrom(resp.Body)
}
