package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/kube"
)

type controllerFlags struct {
	client          kube.ClientFlags
	logs            logFlags
	leaderElect     bool
	leaseNamespace  string
	leaseName       string
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	metricsAddress  string
	webhookURL      string
	webhookTemplate string
	workers         int
	identity        string
	podNamespace    string
}

func newControllerCommand() *cobra.Command {
	f := &controllerFlags{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the maintenance controller: act on the events the agents report",
		Long: "The controller watches the maintenance events sluice agents write onto their nodes and, per\n" +
			"event type and NodePool, does nothing, cordons, or cordons and drains the node before the\n" +
			"event's deadline; it approves the event once the node is empty and uncordons the node when\n" +
			"the event is over. Run two replicas: one leads, the other takes over within seconds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runController(cmd.Context(), f) },
	}
	fs := cmd.Flags()
	f.client.AddFlags(fs)
	f.logs.addFlags(fs)
	host, _ := os.Hostname()
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "hold a Lease so only one replica acts")
	fs.StringVar(&f.leaseNamespace, "leader-election-namespace", envOr("POD_NAMESPACE", "sluice-system"), "namespace of the leader-election Lease (env POD_NAMESPACE)")
	fs.StringVar(&f.leaseName, "leader-election-id", "sluice-controller", "name of the leader-election Lease")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a lost leader's Lease stays valid")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before giving up")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire the Lease")
	fs.StringVar(&f.metricsAddress, "metrics-bind-address", ":8080", "address serving /metrics and /healthz; 0 turns it off")
	fs.StringVar(&f.webhookURL, "webhook-url", envOr("SLUICE_WEBHOOK_URL", ""), "POST every Event the controller records to this URL (env SLUICE_WEBHOOK_URL)")
	fs.StringVar(&f.webhookTemplate, "webhook-template", "", "Go template for the webhook body, or @FILE; fields .Kind .Name .Namespace .Type .Reason .Message .Time, func json (default: a JSON document with a Slack-style text field)")
	fs.IntVar(&f.workers, "workers", 4, "nodes reconciled at once (drains run beside them)")
	fs.StringVar(&f.identity, "identity", envOr("POD_NAME", host), "this replica's name on the Lease and on drain claims (env POD_NAME)")
	fs.StringVar(&f.podNamespace, "pod-namespace", envOr("POD_NAMESPACE", ""), "namespace of the controller's own pod, evicted last when it runs on a node it drains (env POD_NAMESPACE)")
	return cmd
}

func (f *controllerFlags) validate() error {
	var errs []error
	if f.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: must be at least 1", f.workers))
	}
	if f.identity == "" {
		errs = append(errs, errors.New("--identity is empty: set it or POD_NAME"))
	}
	if f.leaderElect {
		if f.leaseNamespace == "" || f.leaseName == "" {
			errs = append(errs, errors.New("--leader-election-namespace and --leader-election-id must not be empty"))
		}
		if f.retryPeriod <= 0 || f.retryPeriod >= f.renewDeadline || f.renewDeadline >= f.leaseDuration {
			errs = append(errs, fmt.Errorf("leader election needs 0 < --leader-election-retry-period (%s) < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s)",
				f.retryPeriod, f.renewDeadline, f.leaseDuration))
		}
	}
	if f.metricsAddress != "0" {
		if _, _, err := net.SplitHostPort(f.metricsAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address %q: give HOST:PORT, :PORT, or 0 to turn it off", f.metricsAddress))
		}
	}
	if f.webhookTemplate != "" && f.webhookURL == "" {
		errs = append(errs, errors.New("--webhook-template needs --webhook-url"))
	}
	return errors.Join(errs...)
}

func runController(ctx context.Context, f *controllerFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := f.logs.logger()
	if err != nil {
		return err
	}
	client, cfg, err := f.client.Client()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	clk := clock.RealClock{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := mcontroller.Options{
		Identity: f.identity,
		Self:     selfPod(f.podNamespace, f.identity),
		Policies: mcontroller.NewPoolPolicies(dyn, log),
		Recorder: kube.NewRecorder(client, clk, "controller"),
		Metrics:  mcontroller.NewMetrics(reg),
		Log:      log,
	}
	if f.webhookURL != "" {
		body, err := readTemplate(f.webhookTemplate)
		if err != nil {
			return err
		}
		if opts.Webhook, err = mcontroller.NewWebhook(f.webhookURL, body, clk, log); err != nil {
			return err
		}
	}
	if f.metricsAddress != "0" {
		stop, err := serveMetrics(f.metricsAddress, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	c := mcontroller.NewController(client, clk, opts)
	if !f.leaderElect {
		return c.Run(ctx, f.workers)
	}
	return leadAndRun(ctx, client, f, log, func(ctx context.Context) error { return c.Run(ctx, f.workers) })
}

// leadAndRun runs work while this replica holds the Lease. On shutdown it
// stops the work first and only then gives up the Lease, so the successor
// never overlaps with a drain still running here, and takes over at once
// instead of waiting for the Lease to expire.
func leadAndRun(ctx context.Context, client kubernetes.Interface, f *controllerFlags, log *slog.Logger, work func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: f.leaseNamespace, Name: f.leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: f.identity},
	}
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var leading atomic.Bool
	workDone := make(chan struct{})
	lost := make(chan struct{})
	go func() {
		<-ctx.Done()
		if leading.Load() {
			<-workDone // the work sees ctx too; let it wind down first
		}
		stopElection()
	}()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   f.leaseDuration,
		RenewDeadline:   f.renewDeadline,
		RetryPeriod:     f.retryPeriod,
		ReleaseOnCancel: true,
		Name:            f.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				leading.Store(true)
				defer close(workDone)
				log.Info("leading", "lease", f.leaseNamespace+"/"+f.leaseName, "identity", f.identity)
				workCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(leaderCtx, cancel)()
				if err := work(workCtx); err != nil {
					log.Error("controller stopped", "err", err)
				}
			},
			OnStoppedLeading: func() { close(lost) },
			OnNewLeader: func(id string) {
				if id != f.identity {
					log.Info("another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	elector.Run(electionCtx)
	<-lost
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("lost the leader-election Lease; exiting so a fresh replica takes over")
}

// selfPod picks the controller's own pod by namespace and name.
func selfPod(namespace, name string) func(*corev1.Pod) bool {
	if namespace == "" || name == "" {
		return nil
	}
	return func(p *corev1.Pod) bool { return p.Namespace == namespace && p.Name == name }
}

func readTemplate(v string) (string, error) {
	file, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--webhook-template: %w", err)
	}
	return string(data), nil
}

// serveMetrics serves /metrics and /healthz until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving metrics", "err", err)
		}
	}()
	log.Info("serving metrics", "address", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
