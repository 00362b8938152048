package archtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerBinaryLinksNoHarness: what runs in production (drover: the
// servers, the workers, the agent and the CLI; the Terraform provider)
// links no test harness (testkit/), no fake of another system (gcefake,
// nomadfake, s3fake, ...), no simulator, and no fault proxy (toxiproxy):
// the benchmarks that need them are drover-bench, a binary of their own.
func TestServerBinaryLinksNoHarness(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"./cmd/drover", "./cmd/terraform-provider-drover"} {
		cmd := exec.Command("go", "list", "-deps", bin)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", bin, err)
		}
		n := 0
		for _, pkg := range strings.Fields(string(out)) {
			n++
			own, ours := strings.CutPrefix(pkg, module+"/")
			switch {
			case ours && (strings.HasPrefix(own, "testkit/") || own == "sim" || strings.HasPrefix(own, "e2e")):
				t.Errorf("%s links %s, a harness", bin, own)
			case ours && strings.HasSuffix(own, "fake"):
				t.Errorf("%s links %s, a fake", bin, own)
			case strings.Contains(pkg, "toxiproxy"):
				t.Errorf("%s links %s, a fault proxy", bin, pkg)
			}
		}
		if n < 100 {
			t.Fatalf("go list -deps %s listed %d packages: not the binary's", bin, n)
		}
	}
	// The check can fail: drover-bench links the harnesses.
	cmd := exec.Command("go", "list", "-deps", "./cmd/drover-bench")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), module+"/testkit/bench\n") || !strings.Contains(string(out), "toxiproxy") {
		t.Fatal("drover-bench does not link testkit/bench and toxiproxy: the check above looks for the wrong names")
	}
}
