package e2e

// The hostile-tenant suite, the autoscaler's part of item 6 of issue 25:
// whatever the autoscaler gives a machine to join the cluster with, a job
// on that machine can read; it must not let the job activate a worker of
// its own (which would be given other tenants' work).

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
)

// TestHostileJoinToken: a server autoscales a cluster on GCE (the fake
// Compute API, in this process). The test plays the machine it launches:
// its metadata server, and its startup script, which starts a real
// `drover worker` with what the script reads from the metadata. A
// tenant's job on that worker reads the machine's metadata, as any job on
// a GCE machine can, and tries to activate a worker of its own with every
// credential it finds: the join token it finds was spent when the worker
// joined, and no worker of the job's is activated (before join tokens,
// the metadata held the cluster's worker secret, and the job's worker got
// in). Then the machine's worker is killed -9 and restarted: with its data
// dir it rejoins its machine and runs jobs; with the data dir lost, the
// spent token gets it nowhere.
func TestHostileJoinToken(t *testing.T) {
	attacker := buildJobProgram(t, "./testkit/joinattack")
	fake := gcefake.New("proj", "zone-a")
	defer fake.Close()
	c := newCluster(t, 1, "-autoscale", "-autoscale-interval", "300ms", "-deployment", "e2e")
	admin := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "gce-a", Region: "r", Provider: "gce",
			ProviderSettings: map[string]string{"project": "proj", "image": "projects/drover/global/images/worker", "endpoint": fake.URL}}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 1, IdleTimeout: "10m", BootTimeout: "2m"},
		LaunchConfigs: []api.LaunchConfig{{Name: "n2", Cluster: "gce-a", MachineType: "n2-standard-2", Zone: "zone-a", CPU: 2, Memory: 4 << 30, PricePerHour: 100_000_000}},
	}); err != nil {
		t.Fatal(err)
	}
	u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "tenant"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddMember(ctx, "tenant", "mallory"); err != nil {
		t.Fatal(err)
	}
	// The job runs on the machine's own network, which an admin allows
	// the project: from the worker's bridge, the default, a job does not
	// reach the machine's metadata server at all (TestHostileNetwork),
	// and the token must be worth nothing to one that does.
	host := true
	if _, err := admin.SetBillingProjectSettings(ctx, "tenant", &api.BillingProjectSettings{AllowHostNetwork: &host}); err != nil {
		t.Fatal(err)
	}
	mallory := c.NewClient(c.HTTPAddrs(), u.Token)

	// The machine's metadata server will listen here (on GCE,
	// metadata.google.internal); the tenant's job is written knowing it.
	// It is open from here on (served once the machine boots), so no
	// other process can take its port in between.
	metadata, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = metadata.Close() })
	metadataAddr := metadata.Addr().String()
	b, err := mallory.CreateBatch(ctx, &api.CreateBatchRequest{Name: "steal", BillingProject: "tenant", Jobs: []api.JobSpec{{JobID: 1,
		Command: []string{attacker, "-metadata", "http://" + metadataAddr, "-api", c.HTTPAddrs()}, CPU: 1, Memory: 64 << 20, Network: api.NetworkHost}}})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	waitFor(t, "the autoscaler's machine at the cloud", time.Minute, func() bool {
		if names := fake.Names(); len(names) == 1 {
			name = names[0]
		}
		return name != ""
	})
	m := bootMachine(t, fake, name, metadata)
	// An instance that is not the machine's worker is the job's.
	intruder := func() *api.Instance {
		insts, err := admin.ListInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			if in.Name != name {
				return &in
			}
		}
		return nil
	}
	waitFor(t, "the tenant's job on the autoscaled machine to end (or a worker of its own to join)", time.Minute, func() bool {
		bt, err := mallory.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete || intruder() != nil
	})
	if in := intruder(); in != nil {
		t.Fatalf("the tenant's job activated a worker of its own with what the machine's metadata holds: %+v", *in)
	}
	log, err := mallory.JobLog(ctx, b.ID, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the job's log:\n%s", log)
	if !strings.Contains(string(log), "metadata drover-join-token: HTTP 200, 64 bytes") {
		t.Fatalf("the job did not find the machine's join token in its metadata: the attack was not made")
	}
	if strings.Contains(string(log), "ACTIVATED") || !strings.Contains(string(log), "spent at") {
		t.Fatalf("the job activated a worker of its own, or was not refused for the spent token")
	}
	for _, key := range []string{"startup-script", "drover-join-token", "drover-worker-secret"} {
		if v, _ := fake.Metadata(name, key); strings.Contains(v, "cluster-secret") {
			t.Fatalf("the machine's metadata %s holds the worker secret", key)
		}
	}

	// The worker crashes and comes back with its data dir: it rejoins its
	// machine (the token was spent; its instance token proves it) and
	// runs the next job.
	m.kill9()
	m.start(t, m.dataDir)
	b2, err := mallory.CreateBatch(ctx, &api.CreateBatchRequest{Name: "after-restart", BillingProject: "tenant", Jobs: []api.JobSpec{{JobID: 1,
		Command: []string{"true"}, CPU: 1, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, mallory, b2.ID, time.Minute, "a job on the restarted worker", func(b *api.Batch) bool { return b.State == api.BatchComplete && b.NSucceeded == 1 })
	// The machine lost its data dir: the spent token gets it nowhere (the
	// autoscaler deletes the machine once idle and launches another for
	// waiting work).
	m.kill9()
	m.start(t, t.TempDir())
	select {
	case <-m.proc.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a worker with the spent join token and no data dir is still running")
	}
	out, _ := os.ReadFile(m.proc.log)
	if !strings.Contains(string(out), "activation refused") || !strings.Contains(string(out), "spent at") {
		t.Fatalf("the worker without its data dir was not refused for the spent token:\n%s", out)
	}
}

// machine is the test's stand-in for a GCE machine the autoscaler
// launched: its metadata server, and the worker its startup script starts.
type machine struct {
	name    string
	fake    *gcefake.Server
	root    string // what the machine's startup script writes to /run/drover
	args    []string
	dataDir string
	proc    *workerProc
}

// bootMachine does what the machine does as it boots: serve its metadata,
// and run its startup script: the files it fetches from the metadata
// server, then the worker it starts (with the machine's paths moved into
// the test's directories). The metadata server serves on l, which the
// test opened when it told the job the address.
func bootMachine(t *testing.T, fake *gcefake.Server, name string, l net.Listener) *machine {
	t.Helper()
	md := &http.Server{Handler: fake.MetadataServer(name), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = md.Serve(l) }()
	t.Cleanup(func() { _ = md.Close() })

	script, ok := fake.Metadata(name, "startup-script")
	if !ok {
		t.Fatalf("machine %s has no startup script", name)
	}
	m := &machine{name: name, fake: fake, root: t.TempDir(), dataDir: t.TempDir()}
	// curl ... /attributes/KEY > /run/drover/FILE
	files := map[string]string{}
	for _, f := range regexp.MustCompile(`attributes/([A-Za-z0-9_-]+) > (/run/drover/[A-Za-z0-9_.-]+)`).FindAllStringSubmatch(script, -1) {
		v, _ := fake.Metadata(name, f[1])
		local := filepath.Join(m.root, filepath.Base(f[2]))
		if err := os.WriteFile(local, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		files[f[2]] = local
	}
	i := strings.Index(script, "\nexec ")
	if i < 0 || len(files) == 0 {
		t.Fatalf("machine %s's startup script fetches no file or starts no worker:\n%s", name, script)
	}
	line := strings.SplitN(script[i+len("\nexec "):], "\n", 2)[0]
	words := shellWords(line)
	for _, w := range words[1:] { // words[0] is the binary
		if local, ok := files[w]; ok {
			w = local
		}
		m.args = append(m.args, w)
	}
	m.start(t, m.dataDir)
	return m
}

// start starts the machine's worker on a data dir.
func (m *machine) start(t *testing.T, dataDir string) {
	t.Helper()
	args := make([]string, 0, len(m.args)+4)
	for i := 0; i < len(m.args); i++ {
		if m.args[i] == "-data-dir" && i+1 < len(m.args) {
			i++
			continue
		}
		args = append(args, m.args[i])
	}
	args = append(args, "-data-dir", dataDir, "-sync-wait", "2s", "-log-level", "info")
	m.proc = spawnWorker(t, "of machine "+m.name, dataDir, args)
}

// kill9 crashes the machine's worker.
func (m *machine) kill9() {
	_ = m.proc.cmd.Process.Kill()
	<-m.proc.done
}

// shellWords splits a line of the startup script into its words: in
// single quotes (a quote inside written as quote, backslash, quote, quote,
// as the script writes it) or bare.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, have := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case in && ch == '\'':
			in = false
		case in:
			cur.WriteByte(ch)
		case ch == '\'':
			in, have = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			have = true
		case ch == ' ':
			if have {
				words = append(words, cur.String())
			}
			cur.Reset()
			have = false
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		words = append(words, cur.String())
	}
	return words
}
