package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// DefaultRequestTimeout bounds each request, and the first contact, of a
// command that has no bound of its own (status, explain, plan, doctor,
// upgrade), unless --request-timeout says otherwise.
const DefaultRequestTimeout = 30 * time.Second

// ErrNoCluster is returned when nothing says which cluster to talk to.
var ErrNoCluster = errors.New("no cluster to talk to")

// Unreachable is the error of a first contact that failed: the server, where
// its address came from, and why.
type Unreachable struct {
	Server string // the API server's URL
	Source string // where the address came from: --server, a kubeconfig, in-cluster
	Cause  error
	// NotKubernetes: something answered, but not as an API server does.
	NotKubernetes bool
}

func (e *Unreachable) Error() string {
	var status apierrors.APIStatus
	if errors.As(e.Cause, &status) && status.Status().Code == 401 {
		return fmt.Sprintf("the API server at %s (%s) refused the credentials: %s", e.Server, e.Source, status.Status().Message)
	}
	if e.NotKubernetes {
		return fmt.Sprintf("the server at %s (%s) is not a Kubernetes API server: %s", e.Server, e.Source, e.Cause)
	}
	return fmt.Sprintf("cannot reach the API server at %s (%s): %s", e.Server, e.Source, cause(e.Cause))
}

func (e *Unreachable) Unwrap() error { return e.Cause }

// source says where the API server's address came from (--server, a
// kubeconfig and its context, in-cluster), for messages; it reads the
// configuration without contacting anyone.
func (f *ClientFlags) source() string {
	conn := f.flags()
	switch {
	case conn.APIServer != nil && *conn.APIServer != "":
		return "--server"
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "" && !f.hasKubeconfig():
		return "in-cluster configuration"
	}
	raw, err := conn.ToRawKubeConfigLoader().RawConfig()
	context := raw.CurrentContext
	if conn.Context != nil && *conn.Context != "" {
		context = *conn.Context
	}
	files := strings.Join(f.kubeconfigPaths(), ", ")
	if err != nil || context == "" {
		return "kubeconfig " + files
	}
	return fmt.Sprintf("kubeconfig %s, context %s", files, context)
}

// checkConfig refuses, before any request, a configuration that names no
// cluster (client-go would silently use http://localhost:8080) or a server
// address that is no URL.
func (f *ClientFlags) checkConfig(cfg *rest.Config) error {
	conn := f.flags()
	explicit := conn.APIServer != nil && *conn.APIServer != ""
	if !explicit && cfg.Host == clientcmd.ClusterDefaults.Server {
		raw, err := conn.ToRawKubeConfigLoader().RawConfig()
		if err != nil || len(raw.Clusters) == 0 {
			return fmt.Errorf("%w: looked for %s, and for an in-cluster service account (%s); "+
				"give --kubeconfig or --server, or set KUBECONFIG", ErrNoCluster, f.lookedFor(), inCluster())
		}
	}
	if err := checkServer(cfg.Host); err != nil {
		from := "the kubeconfig's server"
		if explicit {
			from = "--server"
		}
		return fmt.Errorf("%s %q: %w", from, cfg.Host, err)
	}
	return nil
}

// checkServer accepts what client-go accepts as an API server's address (a
// URL, or host:port taken as https) and refuses the rest by name.
func checkServer(host string) error {
	if host == "" {
		return errors.New("empty: give a URL such as https://10.0.0.1:6443")
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host // host:port, as client-go takes it
	}
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("not a URL (%s): give one such as https://10.0.0.1:6443", cause(err))
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("scheme %q: use https:// (or http://)", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("no host: give a URL such as https://10.0.0.1:6443")
	}
	if net.ParseIP(u.Hostname()) == nil && !hostname.MatchString(u.Hostname()) {
		return fmt.Errorf("host %q is neither an IP address nor a DNS name: give a URL such as https://10.0.0.1:6443", u.Hostname())
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return fmt.Errorf("port %q is not a port number", p)
		}
	}
	return nil
}

// hostname is a DNS name as resolvers take it (labels of letters, digits,
// hyphens and underscores).
var hostname = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$`)

// lookedFor names the places a kubeconfig was looked for, for the error when
// none named a cluster.
func (f *ClientFlags) lookedFor() string {
	conn := f.flags()
	if conn.KubeConfig != nil && *conn.KubeConfig != "" {
		return "--kubeconfig " + *conn.KubeConfig
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return "$KUBECONFIG (" + env + ")"
	}
	return "--kubeconfig (not given), $KUBECONFIG (unset), " + clientcmd.RecommendedHomeFile + " (not found)"
}

// inCluster says why the in-cluster configuration was not used.
func inCluster() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return "KUBERNETES_SERVICE_HOST is unset"
	}
	return "KUBERNETES_SERVICE_HOST is set, but KUBERNETES_SERVICE_PORT or the token at " + serviceAccountToken + " is missing"
}

const serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // a file's path, named in a message, not a credential

func (f *ClientFlags) hasKubeconfig() bool {
	for _, p := range f.kubeconfigPaths() {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func (f *ClientFlags) kubeconfigPaths() []string {
	conn := f.flags()
	if conn.KubeConfig != nil && *conn.KubeConfig != "" {
		return []string{*conn.KubeConfig}
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return filepath.SplitList(env)
	}
	return []string{clientcmd.RecommendedHomeFile}
}

// ContactTimeout is how long a command waits for the API server's first
// answer: --request-timeout when given, else Contact, else
// DefaultRequestTimeout.
func (f *ClientFlags) ContactTimeout() time.Duration {
	if d := f.requestTimeout(); d > 0 {
		return d
	}
	if f.Contact > 0 {
		return f.Contact
	}
	return DefaultRequestTimeout
}

// timeoutGiven says whether --request-timeout was given, 0 included.
func (f *ClientFlags) timeoutGiven() bool {
	return f.fs != nil && f.conn != nil && f.conn.Timeout != nil && f.fs.Changed("request-timeout")
}

// requestTimeout is --request-timeout as given (0 when not, or when the
// command owns the flag).
func (f *ClientFlags) requestTimeout() time.Duration {
	conn := f.flags()
	if conn.Timeout == nil {
		return 0
	}
	v := *conn.Timeout
	if v == "" || v == "0" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return 0
}

// Reach asks the API server for its version within timeout: the first
// contact of a command. The error is an *Unreachable naming the server, where
// its address came from, and why.
func Reach(ctx context.Context, cfg *rest.Config, source string, timeout time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(withoutTimeout(cfg))
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within %s (--request-timeout)", timeout))
	defer cancel()
	body, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	switch {
	case err == nil:
		var v version.Info
		if json.Unmarshal(body, &v) != nil || v.GitVersion == "" {
			return &Unreachable{Server: cfg.Host, Source: source, NotKubernetes: true, Cause: errors.New("its /version names no Kubernetes version")}
		}
		return nil
	case apierrors.IsForbidden(err):
		return nil // RBAC hides /version from these credentials; the command's own requests say more
	case apierrors.IsNotFound(err):
		return &Unreachable{Server: cfg.Host, Source: source, NotKubernetes: true, Cause: errors.New("it answered /version with 404 Not Found")}
	}
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
	}
	return &Unreachable{Server: cfg.Host, Source: source, Cause: err}
}

// WaitForServer makes first contact for a service (the controller, the
// agent), each attempt bounded by timeout: it retries with backoff (1 s doubling to 1 min) until the API server
// answers or ctx ends, logging one line per failed attempt.
func WaitForServer(ctx context.Context, cfg *rest.Config, source string, timeout time.Duration, clk clock.WithTicker, log *slog.Logger) error {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: time.Minute}
	for attempt := 1; ; attempt++ {
		err := Reach(ctx, cfg, source, timeout)
		if err == nil {
			if attempt > 1 {
				log.Info("API server reached", "server", cfg.Host, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := backoff.Step()
		log.Error("API server unreachable, retrying", "server", cfg.Host, "source", source, "cause", cause(err), "attempt", attempt, "retryIn", delay.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(delay):
		}
	}
}

// withoutTimeout is cfg with no client-wide timeout: the probe has its own.
func withoutTimeout(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Timeout = 0
	return c
}

// cause is the innermost useful text of a transport error: url.Error's
// "Get \"https://...\": dial tcp ...: connection refused" becomes "dial tcp
// ...: connection refused", the URL being named already.
func cause(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.Err != nil {
		err = uerr.Err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
