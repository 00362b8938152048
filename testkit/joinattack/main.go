// Command joinattack is what a hostile job on one of the autoscaler's
// machines tries: it reads the credentials the machine's metadata server
// gives anything that runs there (where GCE's startup script reads them)
// and tries to activate a worker of its own with each, which would then
// be given other tenants' work. It prints what it found and what the
// servers answered, one line each, and exits 0: the test that runs it as
// a job reads its log (e2e TestHostileJoinToken).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
)

// keys are the metadata items a drover worker's credential has lived in.
var keys = []string{"drover-join-token", "drover-worker-secret"}

func main() {
	metadata := flag.String("metadata", "http://metadata.google.internal", "the machine's metadata server")
	servers := flag.String("api", "", "the drover servers' API")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	machine, status := get(ctx, *metadata+"/computeMetadata/v1/instance/name")
	fmt.Printf("machine name: HTTP %d %q\n", status, machine)
	for _, key := range keys {
		v, status := get(ctx, *metadata+"/computeMetadata/v1/instance/attributes/"+key)
		fmt.Printf("metadata %s: HTTP %d, %d bytes\n", key, status, len(v))
		if status != http.StatusOK || v == "" {
			continue
		}
		for _, on := range []string{machine, ""} {
			req := &api.ActivateRequest{Name: "intruder", Machine: on, CPU: 1, Memory: 1 << 30, Token: api.NewToken()}
			if key == "drover-join-token" {
				if on == "" {
					continue // a join token is for its machine only
				}
				req.JoinToken = v
			} else {
				req.Secret = v
			}
			res, err := api.NewClient(*servers, "").Workers().Activate(ctx, req)
			if err != nil {
				fmt.Printf("activate with %s on machine %q: refused: %v\n", key, on, err)
				continue
			}
			fmt.Printf("activate with %s on machine %q: ACTIVATED instance %d\n", key, on, res.InstanceID)
		}
	}
}

// get reads a metadata item as GCE's metadata server serves it.
func get(ctx context.Context, url string) (string, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return "", 0
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Printf("GET %s: %v\n", url, err)
		return "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return strings.TrimSpace(string(b)), resp.StatusCode
}
