package maintenance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// TestMetadataClientsNeverUseAProxy sets the proxy variables to a server
// that records what reaches it, and reads each cloud's metadata at the
// link-local address it has on a real VM. Go never proxies loopback
// addresses, so the clients aim at 169.254.169.254 (which answers nothing
// here): the proxy must see no request, whatever the read's outcome.
//
// net/http reads the proxy variables once per process, so no test in this
// package may make an HTTP request before this one.
func TestMetadataClientsNeverUseAProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		t.Logf("the proxy received %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	const linkLocal = "http://169.254.169.254"
	const timeout = 300 * time.Millisecond
	read := map[string]func(ctx context.Context) error{
		"azure": func(ctx context.Context) error {
			c, err := azure.NewClient(linkLocal, timeout)
			if err != nil {
				return err
			}
			_, err = c.Document(ctx)
			return err
		},
		"aws": func(ctx context.Context) error {
			c, err := aws.NewClient(linkLocal, timeout, clocktesting.NewFakeClock(time.Now()))
			if err != nil {
				return err
			}
			_, err = c.SpotAction(ctx)
			return err
		},
		"gcp": func(ctx context.Context) error {
			c, err := gcp.NewClient(linkLocal, timeout)
			if err != nil {
				return err
			}
			_, err = c.Get(ctx, gcp.PathPreempted)
			return err
		},
	}
	for name, fn := range read {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := fn(ctx)
		cancel()
		t.Logf("%s: %v", name, err)
		if n := proxied.Swap(0); n != 0 {
			t.Errorf("%s: %d requests went through the proxy from the environment; metadata is link-local and must be reached directly", name, n)
		}
	}
}
