package worker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// watchSpotNotice waits for the cloud's notice that this machine is being
// taken back, the way GCE's metadata server gives it: a GET of the URL
// with ?wait_for_change=true (and the Metadata-Flavor: Google header)
// answers when the value changes, and "TRUE" is the notice. It returns
// true on the notice, false when ctx ends. Errors (a metadata server
// that is not there yet) are retried with a backoff.
func watchSpotNotice(ctx context.Context, url string, log *slog.Logger) bool {
	client := &http.Client{}
	backoff := time.Second
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+sep+"wait_for_change=true", nil)
		if err != nil {
			log.Error("spot notice URL", "url", url, "err", err)
			return false
		}
		req.Header.Set("Metadata-Flavor", "Google")
		asked := time.Now()
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if strings.EqualFold(strings.TrimSpace(string(body)), "TRUE") {
					return true
				}
				backoff = time.Second
				// A server that answers at once, not when the value
				// changes, is asked once a second.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second - time.Since(asked)):
				}
				continue
			}
			log.Warn("spot notice", "url", url, "status", resp.Status)
		} else if ctx.Err() == nil {
			log.Warn("spot notice", "url", url, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
	return false
}
