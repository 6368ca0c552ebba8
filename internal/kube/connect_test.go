package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestCheckServer(t *testing.T) {
	for _, c := range []struct{ host, err string }{
		{"https://10.0.0.1:6443", ""},
		{"https://[::1]:6443", ""},
		{"localhost:6443", ""},
		{"http://api.example.com", ""},
		{"api_server.internal:443", ""},
		{"::::", `host ":::" is neither an IP address nor a DNS name`},
		{"ftp://x", `scheme "ftp"`},
		{"https://", "no host"},
		{"https://a b", "not a URL"},
		{"https://host:99999", `port "99999" is not a port number`},
		{"https://-x", `host "-x"`},
		{"", "empty"},
	} {
		err := checkServer(c.host)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: refused with %v, want accepted", c.host, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.host, err, c.err)
		}
	}
}

// Given, --request-timeout wins, 0 included (no bound on requests); not
// given, the command's default applies; the first contact is bounded either
// way.
func TestRequestTimeout(t *testing.T) {
	for _, c := range []struct {
		args             []string
		request, contact time.Duration
	}{
		{nil, DefaultRequestTimeout, DefaultRequestTimeout},
		{[]string{"--request-timeout", "5s"}, 5 * time.Second, 5 * time.Second},
		{[]string{"--request-timeout", "0"}, 0, DefaultRequestTimeout},
	} {
		f := ClientFlags{RequestTimeout: DefaultRequestTimeout}
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(append(c.args, "--server", "https://127.0.0.1:6443")); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != c.request || f.ContactTimeout() != c.contact {
			t.Errorf("%v: request timeout %s, contact %s; want %s and %s", c.args, cfg.Timeout, f.ContactTimeout(), c.request, c.contact)
		}
	}
}

func TestNoClusterIsNamed(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("HOME", t.TempDir())
	f := ClientFlags{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddFlags(fs)
	_, err := f.RESTConfig()
	if err == nil || !strings.Contains(err.Error(), "no cluster to talk to") || !strings.Contains(err.Error(), "$KUBECONFIG (unset)") {
		t.Fatalf("error %v, want one naming where it looked", err)
	}
}
