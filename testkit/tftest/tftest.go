// Package tftest runs the real terraform binary against drover for
// tests: this repository's provider, built and installed through
// dev_overrides, in a working directory of its own.
package tftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ModuleRoot is the repository's root.
func ModuleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

func terraformBinary(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("TERRAFORM"); p != "" {
		return p
	}
	p := filepath.Join(root, ".tools", "terraform")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no terraform at %s: `make test` (make tools) installs Terraform 1.5.7 there, or set TERRAFORM", p)
	}
	return p
}

// TF runs terraform in a working directory against one server.
type TF struct {
	t   *testing.T
	bin string
	dir string
	// Env is terraform's environment; Last the output of its last run.
	Env  []string
	Last string
}

// New builds the provider and makes a working directory, the provider
// configured by DROVER_ADDR and DROVER_TOKEN.
func New(t *testing.T, addr, token string) *TF {
	t.Helper()
	root := ModuleRoot(t)
	bin := terraformBinary(t, root)
	plugins := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "terraform-provider-drover"), "./cmd/terraform-provider-drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	home := t.TempDir()
	rc := filepath.Join(home, "terraformrc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides {
    "drover-sched/drover" = %q
  }
  direct {}
}
`, plugins)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "HOME="+home, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"DROVER_ADDR="+addr, "DROVER_TOKEN="+token)
	return &TF{t: t, bin: bin, dir: t.TempDir(), Env: env}
}

// Config writes main.tf, the provider configured by the environment.
func (f *TF) Config(body string) {
	f.t.Helper()
	f.ConfigWith(`
provider "drover" {}
`, body)
}

// ConfigWith writes main.tf with a provider block.
func (f *TF) ConfigWith(provider, body string) {
	f.t.Helper()
	src := `terraform {
  required_providers {
    drover = { source = "drover-sched/drover" }
  }
}
` + provider + body
	if err := os.WriteFile(filepath.Join(f.dir, "main.tf"), []byte(src), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// Run runs terraform and returns its exit code (its output in f.Last).
func (f *TF) Run(args ...string) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, append([]string{args[0], "-no-color"}, args[1:]...)...)
	cmd.Dir, cmd.Env = f.dir, f.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	f.Last = out.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	f.t.Fatalf("terraform %v: %v\n%s", args, err, f.Last)
	return -1
}

// Must runs terraform and fails the test unless it succeeds.
func (f *TF) Must(args ...string) {
	f.t.Helper()
	if code := f.Run(args...); code != 0 {
		f.t.Fatalf("terraform %v: exit %d\n%s", args, code, f.Last)
	}
}

// Plan runs terraform plan -detailed-exitcode: 0 nothing to do, 2 changes.
func (f *TF) Plan() int {
	f.t.Helper()
	code := f.Run("plan", "-input=false", "-detailed-exitcode")
	if code == 1 {
		f.t.Fatalf("terraform plan failed:\n%s", f.Last)
	}
	return code
}
