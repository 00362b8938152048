package e2e

// The hostile-tenant suite, item 1 of issue 41: an image pull is the
// worker's act, with the worker's network position, for a reference a job
// chose. A real dev agent, its real workers, real container jobs on
// network "none" whose images name the host's services.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// hostService is a service on the host's loopback that is not a registry:
// it answers every request with a secret and counts the requests.
func hostService(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(500)
		io.WriteString(w, "SECRET of the host's service")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), hits
}

// worldRegistry starts jobtool's fake registry in the outside network, on
// port, redirecting to target or holding every pull (target "").
func worldRegistry(t *testing.T, o *outsideNet, tool, port, target string) string {
	t.Helper()
	hp := net.JoinHostPort(o.addr, port)
	args := []string{"netns", "exec", o.ns, tool, "fake-registry", hp, "hold"}
	if target != "" {
		args = []string{"netns", "exec", o.ns, tool, "fake-registry", hp, "redirect", target}
	}
	startListener(t, "fake registry at "+hp, exec.Command("ip", args...))
	return hp
}

// TestHostileImagePulls: network "none" containers whose images name a
// service on the host's loopback, the agent's own API, the cloud's
// metadata address, and a registry of the tenant's (in the world) that
// redirects to the host's service (plain HTTP, which the operator
// allowed it): no pull connects to any of them, every
// job ends in error saying so, and nothing a service answered reaches a
// job's message or log. A reference with ".." in its name is refused at
// submit. On the old worker the host's service was asked and its answer
// was in the job's message.
func TestHostileImagePulls(t *testing.T) {
	tool, _, _ := jobtoolImage(t)
	o := newOutsideNet(t, tool, true)
	svc, hits := hostService(t)
	redirect := worldRegistry(t, o, tool, "8081", "http://"+svc)
	// The tenant's registry speaks plain HTTP, which the operator allowed.
	a := startAgent(t, "", "", "-insecure-registry", redirect)
	api0 := strings.TrimPrefix(a.addr, "http://")
	images := []string{
		svc + "/internal/x:1",                 // the host's service
		api0 + "/api/v1:1",                    // the agent's own API
		"169.254.169.254:8080/latest/meta:1",  // the cloud's metadata
		redirect + "/tenant/registry:1",       // the tenant's registry, redirecting to the host
		"localhost:" + portOf(svc) + "/a/b:1", // by name
	}
	var jobs []api.JobSpec
	for i, img := range images {
		jobs = append(jobs, api.JobSpec{Name: fmt.Sprintf("pull-%d", i), Image: img, Network: api.NetworkNone, Command: []string{"true"}})
	}
	b := submit(t, a, "pulls", jobs...)
	for i, img := range images {
		log := jobLog(t, a, b, int64(i+1))
		j, err := a.client().GetJob(context.Background(), b, int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s %q", img, j.State, j.Message)
		if j.State != api.JobError || !strings.Contains(j.Message, "does not connect") {
			t.Errorf("the pull of %s: %s %q", img, j.State, j.Message)
		}
		for _, s := range []string{j.Message, log} {
			if strings.Contains(s, "SECRET") || strings.Contains(s, "world ") || strings.Contains(s, "drover") && strings.Contains(s, "version") {
				t.Errorf("the job of %s read what a service answered: %s", img, s)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's service was asked %d times for tenants' pulls", n)
	}
	// A name that climbs out of the registry's API path never reaches a
	// worker.
	_, err := a.client().CreateBatch(context.Background(), &api.CreateBatchRequest{Name: "dots", Jobs: []api.JobSpec{
		{JobID: 1, Image: "localhost:" + portOf(svc) + "/../../x:1", Command: []string{"true"}, CPU: 0.1, Memory: 64 << 20}}})
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, `".."`) {
		t.Errorf("an image with '..' in its name: %v, want a 400 naming it", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's service was asked %d times", n)
	}
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// TestHostileSlowRegistryIsBilled: a tenant's own registry holds the pull
// of its image. The attempt holds a core meanwhile, so it is billed from
// its reservation (its start time and cost are there while it pulls), the
// pull ends at the worker's -pull-timeout, and its time is in the
// attempt's usage. On the old worker the attempt ran with no start time
// and no cost for as long as the registry held it.
func TestHostileSlowRegistryIsBilled(t *testing.T) {
	tool, _, _ := jobtoolImage(t)
	o := newOutsideNet(t, tool, false)
	slow := worldRegistry(t, o, tool, "8082", "")
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "2", "-pull-timeout", "6s", "-insecure-registry", slow)
	c := tenantClients(t, a, "slow")["slow"]
	ctx := context.Background()
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "slow", Jobs: []api.JobSpec{
		{JobID: 1, Name: "pull", Image: slow + "/tenant/slow:1", Network: api.NetworkNone, Command: []string{"true"}, CPU: 1, Memory: 256 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var j *api.Job
	waitFor(t, "the attempt to be pulling", time.Minute, func() bool {
		j, err = c.GetJob(ctx, res.ID, 1)
		return err == nil && j.State == api.JobRunning && len(j.Attempts) == 1
	})
	time.Sleep(2 * time.Second)
	j, err = c.GetJob(ctx, res.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if at := j.Attempts[0]; at.StartTime == nil || at.Cost == nil || *at.Cost <= 0 {
		t.Errorf("an attempt pulling for 2 s: start %v, cost %v; want it billed from its reservation", at.StartTime, at.Cost)
	}
	j = finished(t, c, res.ID, 1)
	at := j.Attempts[0]
	t.Logf("%s %q; attempt %+v usage %+v", j.State, j.Message, at, at.Usage)
	if j.State != api.JobError || !strings.Contains(j.Message, "not done after 6s") || !strings.Contains(j.Message, "-pull-timeout") {
		t.Errorf("the held pull ended %s %q; want the worker's -pull-timeout", j.State, j.Message)
	}
	if at.StartTime == nil || at.EndTime == nil || at.EndTime.Sub(*at.StartTime) < 6*time.Second {
		t.Errorf("the attempt ran %v to %v; want at least the 6 s it pulled", at.StartTime, at.EndTime)
	}
	if at.Usage == nil || at.Usage.ImageSeconds < 5.5 {
		t.Errorf("usage %+v; want image_seconds of the 6 s pull", at.Usage)
	}
}
