package kube

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ClientFlags are kubectl's connection flags, from k8s.io/cli-runtime as
// kubectl has them (--kubeconfig, falling back to $KUBECONFIG and
// ~/.kube/config; --context, --cluster, --user, --server, --token, --as,
// --as-group, --as-uid, the TLS flags, --request-timeout, ...), with the
// client's rate limits. Kubeconfig and Context serve code that builds a
// client without flags.
type ClientFlags struct {
	Kubeconfig string
	Context    string
	QPS        float32
	Burst      int
	// OwnRequestTimeout leaves --request-timeout to the command, which
	// defines its own (the controller bounds its reconciles with it too).
	OwnRequestTimeout bool
	// OwnVerbosity leaves -v to the command: the long-running ones send the
	// client's klog lines through their structured log.
	OwnVerbosity bool
	// Verbosity is kubectl's -v: 6 and up prints every request the client
	// makes (klog's format, on stderr), 8 and up their bodies too.
	Verbosity int
	// RequestTimeout bounds each request when --request-timeout is not
	// given (DefaultRequestTimeout for a command with no bound of its own);
	// zero leaves them unbounded, for a command whose watches must outlive
	// any one bound and which bounds its own waits.
	RequestTimeout time.Duration
	// Contact, when set, bounds the first contact (a command that owns
	// --request-timeout sets it from its own flag).
	Contact time.Duration

	conn *genericclioptions.ConfigFlags // set by AddFlags
	fs   *pflag.FlagSet                 // set by AddFlags
}

// Default client rate limits, for a command that sets none of its own.
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// AddFlags registers the flags. QPS and Burst, when already set, are the
// flags' defaults (a controller needs more than a one-off command).
func (f *ClientFlags) AddFlags(fs *pflag.FlagSet) {
	qps, burst := f.QPS, f.Burst
	if qps <= 0 {
		qps = DefaultQPS
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	f.conn = genericclioptions.NewConfigFlags(false)
	f.conn.Namespace = nil // sluice's commands are cluster-wide: there is no namespace to default
	f.conn.CacheDir = nil  // nor a discovery cache to keep
	if f.OwnRequestTimeout {
		f.conn.Timeout = nil
	}
	f.conn.AddFlags(fs)
	f.fs = fs
	fs.Float32Var(&f.QPS, "kube-api-qps", qps, "requests per second to the API server, on average")
	fs.IntVar(&f.Burst, "kube-api-burst", burst, "requests to the API server in a burst above --kube-api-qps")
	if !f.OwnVerbosity {
		fs.IntVarP(&f.Verbosity, "v", "v", 0, "the Kubernetes client's log verbosity, as kubectl's -v: 6 prints each request, 8 their bodies")
	}
}

// flags are the connection flags as parsed, or, for a ClientFlags built
// without AddFlags, those its Kubeconfig and Context say.
func (f *ClientFlags) flags() *genericclioptions.ConfigFlags {
	if f.conn == nil {
		f.conn = genericclioptions.NewConfigFlags(false)
		f.conn.KubeConfig, f.conn.Context = &f.Kubeconfig, &f.Context
		f.conn.Timeout = nil
	}
	return f.conn
}

// RESTConfig loads the client configuration the flags describe, and refuses
// one that names no cluster or a server address that is no URL, before any
// request.
func (f *ClientFlags) RESTConfig() (*rest.Config, error) {
	conn := f.flags()
	if conn.Timeout != nil {
		if _, err := clientcmd.ParseTimeout(*conn.Timeout); err != nil {
			return nil, fmt.Errorf("--request-timeout %q: give a duration such as 30s (0 for none)", *conn.Timeout)
		}
	}
	cfg, err := conn.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if err := f.checkConfig(cfg); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 && !f.timeoutGiven() {
		cfg.Timeout = f.RequestTimeout // --request-timeout 0, given, means none
	}
	if f.QPS < 0 || f.Burst < 0 {
		return nil, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d: both must be positive", f.QPS, f.Burst)
	}
	if !f.OwnVerbosity && f.Verbosity != 0 {
		if f.Verbosity < 0 {
			return nil, fmt.Errorf("-v %d: use 0 or more", f.Verbosity)
		}
		var klogFlags flag.FlagSet
		klog.InitFlags(&klogFlags)
		if err := klogFlags.Set("v", strconv.Itoa(f.Verbosity)); err != nil {
			return nil, fmt.Errorf("-v %d: %w", f.Verbosity, err)
		}
	}
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if f.QPS > 0 {
		cfg.QPS = f.QPS
	}
	if f.Burst > 0 {
		cfg.Burst = f.Burst
	}
	cfg.UserAgent = "sluice"
	return cfg, nil
}

// Client builds a clientset from the flags and makes first contact with the
// API server within ContactTimeout.
func (f *ClientFlags) Client(ctx context.Context) (kubernetes.Interface, *rest.Config, error) {
	return f.ClientWithin(ctx, f.ContactTimeout())
}

// ClientWithin is Client with the first contact bounded by bound instead (a
// drain's own --timeout or --deadline, when shorter).
func (f *ClientFlags) ClientWithin(ctx context.Context, bound time.Duration) (kubernetes.Interface, *rest.Config, error) {
	return f.connect(func(cfg *rest.Config, source string) error { return Reach(ctx, cfg, source, bound) })
}

// ServiceClient is Client for a service (the controller, the agent): a
// configuration that names no cluster fails at once, but an API server that
// does not answer is waited for, with backoff and one log line per attempt,
// until it does or ctx ends.
func (f *ClientFlags) ServiceClient(ctx context.Context, clk clock.WithTicker, log *slog.Logger) (kubernetes.Interface, *rest.Config, error) {
	return f.connect(func(cfg *rest.Config, source string) error {
		return WaitForServer(ctx, cfg, source, f.ContactTimeout(), clk, log)
	})
}

// connect loads and checks the configuration, builds the clientset, and
// makes first contact as contact says.
func (f *ClientFlags) connect(contact func(cfg *rest.Config, source string) error) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client: %w", err)
	}
	if err := contact(cfg, f.source()); err != nil {
		return nil, nil, err
	}
	return c, cfg, nil
}
