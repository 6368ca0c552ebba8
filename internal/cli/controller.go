package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/awsclient"
	"github.com/sluice-dev/sluice/internal/awsqueue"
	"github.com/sluice-dev/sluice/internal/controller"
	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/memlimit"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/registry"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
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
	healthAddress   string
	requestTimeout  time.Duration
	maxNodes        int
	maxNodesPerPool int
	maxInFlight     int
	webhookURL      string
	webhookTemplate string
	workers         int
	identity        string
	podNamespace    string
	providers       []string
	awsQueueURL     string
	dryRun          bool
	profiling       bool
	registration    time.Duration
	validation      time.Duration
	// timelineRetention: how long each node's last drain timeline is kept.
	timelineRetention time.Duration
}

// The controller's defaults: a node's reconcile is a cache read and one
// write, so workers mostly wait on the API server (1-3 s a write on a
// saturated one); 64 of them take 100 nodes preempted within 2 s in two
// rounds, where 16 took seven.
const (
	defaultWorkers = 64
	// defaultTimelineRetention: each node's last drain is kept a day.
	defaultTimelineRetention = 24 * time.Hour
	controllerQPS            = 200
	controllerBurst          = 400
	// controllerGCPercent lets the heap grow by half what is live before a
	// collection (Go's default: by all of it); GOGC overrides it.
	controllerGCPercent = 50
)

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
	// A mass preemption is thousands of evictions within the cloud's
	// notice: 30 pods on each of 100 nodes in 30 s is 100 evictions a
	// second before any cordon, Event or claim. The API server's own
	// priority and fairness, and --max-in-flight, keep it safe.
	f.client.QPS, f.client.Burst = controllerQPS, controllerBurst
	f.client.OwnRequestTimeout, f.client.OwnVerbosity = true, true
	f.client.AddFlags(fs)
	f.logs.addFlags(fs)
	host, _ := os.Hostname()
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "hold a Lease so only one replica acts")
	fs.StringVar(&f.leaseNamespace, "leader-election-namespace", envOr("POD_NAMESPACE", "sluice-system"), "the controller's namespace: its leader-election Lease and its drains' timelines (env POD_NAMESPACE)")
	fs.StringVar(&f.leaseName, "leader-election-id", "sluice-controller", "name of the leader-election Lease")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a lost leader's Lease stays valid")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before giving up")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire the Lease")
	fs.StringVar(&f.metricsAddress, "metrics-bind-address", ":8080", "address serving Prometheus /metrics; 0 turns it off")
	fs.BoolVar(&f.profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on --metrics-bind-address (heap, goroutines, CPU); they show the controller's internals to whoever reaches that port")
	fs.StringVar(&f.healthAddress, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; 0 turns it off")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "bound on each API request and each node's reconcile (watches excepted)")
	fs.IntVar(&f.maxNodes, "max-disrupting-nodes", 0, "at most this many nodes drain at once for voluntary reasons, cluster-wide; maintenance events start past the cap but count against it (0: no cap)")
	fs.IntVar(&f.maxNodesPerPool, "max-disrupting-nodes-per-pool", 0, "the same cap per NodePool (0: no cap)")
	fs.IntVar(&f.maxInFlight, "max-in-flight", 50, "evictions outstanding at once across every drain")
	fs.StringVar(&f.webhookURL, "webhook-url", envOr("SLUICE_WEBHOOK_URL", ""), "POST every Event the controller records to this URL (env SLUICE_WEBHOOK_URL)")
	fs.StringVar(&f.webhookTemplate, "webhook-template", "", "Go template for the webhook body, or @FILE; fields .Kind .Name .Namespace .Type .Reason .Message .Time, func json (default: a JSON document with a Slack-style text field)")
	fs.IntVar(&f.workers, "workers", defaultWorkers, "nodes reconciled at once (drains run beside them)")
	fs.StringVar(&f.identity, "identity", envOr("POD_NAME", host), "this replica's name on the Lease and on drain claims (env POD_NAME)")
	fs.StringVar(&f.awsQueueURL, "aws-queue-url", "", "AWS queue mode: the URL of the SQS queue EventBridge feeds with spot interruption, rebalance, state-change, AWS Health and terminate lifecycle-hook events; their nodes need no agent (docs/providers.md)")
	fs.StringSliceVar(&f.providers, "providers", nil, "machine providers this controller runs for NodePools that name them (kwok: the sandbox's simulated cloud); a pool whose provider is not listed is only reported on")
	fs.BoolVar(&f.dryRun, "dry-run", false, "decide and report (NodePool status, WouldAct and WouldReplace Events, logs) what would be done about maintenance events, drift, expiry and deleted nodes, and change no node or machine")
	fs.DurationVar(&f.registration, "registration-timeout", 10*time.Minute, "how long a replacement machine may take to become a Ready node before it is given up and deleted (the old node stays in service)")
	fs.DurationVar(&f.validation, "consolidation-validation-delay", 15*time.Second, "how long a consolidation decision waits before a second pass must make it again for it to be carried out (the cluster may have moved)")
	fs.DurationVar(&f.timelineRetention, "timeline-retention", defaultTimelineRetention, "keep each node's last drain as a timeline (ConfigMap sluice-timeline-NODE in --leader-election-namespace) this long after it ends (pruned hourly), for sluice explain node NODE --timeline; 0 keeps none and deletes those kept before")
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
	errs = append(errs, f.validateServing()...)
	if f.requestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %s: must be positive", f.requestTimeout))
	}
	if f.maxNodes < 0 || f.maxNodesPerPool < 0 {
		errs = append(errs, errors.New("--max-disrupting-nodes and --max-disrupting-nodes-per-pool must not be negative (0: no cap)"))
	}
	if f.maxInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-in-flight %d: must be at least 1", f.maxInFlight))
	}
	switch {
	case f.timelineRetention < 0:
		errs = append(errs, fmt.Errorf("--timeline-retention %s: must not be negative (0 keeps no timelines)", f.timelineRetention))
	case f.leaseNamespace == "" && !f.leaderElect: // with leader election, refused above
		errs = append(errs, errors.New("--leader-election-namespace is empty: the controller keeps its Lease and its drains' timelines there; name it"))
	}
	errs = append(errs, f.validatePools()...)
	if f.awsQueueURL != "" && !sqsURL.MatchString(f.awsQueueURL) {
		errs = append(errs, fmt.Errorf("--aws-queue-url %q: want an SQS queue URL, https://sqs.<region>.amazonaws.com/<account>/<queue>", f.awsQueueURL))
	}
	if f.webhookTemplate != "" && f.webhookURL == "" {
		errs = append(errs, errors.New("--webhook-template needs --webhook-url"))
	}
	return errors.Join(errs...)
}

// validateServing checks the addresses the controller serves on.
func (f *controllerFlags) validateServing() []error {
	var errs []error
	for flag, addr := range map[string]string{"--metrics-bind-address": f.metricsAddress, "--health-probe-bind-address": f.healthAddress} {
		if err := checkBindAddress(flag, addr); err != nil {
			errs = append(errs, err)
		}
	}
	if f.profiling && f.metricsAddress == "0" {
		errs = append(errs, errors.New("--profiling serves on --metrics-bind-address, which is 0 (off): give it an address"))
	}
	return errs
}

// validatePools checks the flags for NodePools with providers.
func (f *controllerFlags) validatePools() []error {
	var errs []error
	for _, p := range f.providers {
		if _, ok := registry.Lookup(v1alpha1.ProviderName(p)); !ok {
			errs = append(errs, fmt.Errorf("--providers %q: sluice knows %v", p, registry.Names()))
		}
	}
	if f.registration <= 0 {
		errs = append(errs, fmt.Errorf("--registration-timeout %s: must be positive", f.registration))
	}
	if f.validation <= 0 {
		errs = append(errs, fmt.Errorf("--consolidation-validation-delay %s: must be positive, such as 15s", f.validation))
	}
	return errs
}

func runController(ctx context.Context, f *controllerFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := f.logs.logger()
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	f.client.Contact = f.requestTimeout
	_, cfg, err := f.client.ServiceClient(ctx, clk, log)
	if err != nil {
		return stoppedIsNoError(ctx, err)
	}
	// The cache holds every pod of the cluster: collect at half the
	// default growth, and stay under the container's limit.
	mem := memlimit.Apply(controllerGCPercent, "/sys/fs/cgroup")
	log.Info("memory", "gcPercent", mem.GCPercent, "softLimitBytes", mem.Limit, "containerLimitBytes", mem.Cgroup)
	opts := controller.Options{
		Identity:       f.identity,
		PodNamespace:   f.podNamespace,
		LeaderElection: f.leaderElect,
		LeaseNamespace: f.leaseNamespace,
		LeaseName:      f.leaseName,
		LeaseDuration:  f.leaseDuration,
		RenewDeadline:  f.renewDeadline,
		RetryPeriod:    f.retryPeriod,
		MetricsAddress: f.metricsAddress,
		HealthAddress:  f.healthAddress,
		Profiling:      f.profiling,
		RequestTimeout: f.requestTimeout,
		Workers:        f.workers,
		Limits:         termination.Limits{MaxNodes: f.maxNodes, MaxNodesPerPool: f.maxNodesPerPool},
		MaxInFlight:    f.maxInFlight,
		Log:            log,
		Clock:          clk,
		DryRun:         f.dryRun,

		RegistrationTimeout:          f.registration,
		ConsolidationValidationDelay: f.validation,
		TimelineNamespace:            f.leaseNamespace,
		TimelineRetention:            f.timelineRetention,
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
	if len(f.providers) > 0 {
		set, err := providers(ctx, cfg, f.providers, f.leaseNamespace, clk, log)
		if err != nil {
			return err
		}
		opts.Machines = provider.NewMachines(set, clk)
	}
	if f.awsQueueURL != "" {
		run, err := awsQueue(ctx, cfg, f.awsQueueURL, clk, log)
		if err != nil {
			return err
		}
		opts.Leading = append(opts.Leading, run)
	}
	mgr, err := controller.New(cfg, opts)
	if err != nil {
		return err
	}
	log.Info("controller starting", "identity", f.identity, "leaderElection", f.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the controller: %w", err)
	}
	return nil
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

// providers starts the named machine providers, running those with work of
// their own until ctx ends. namespace is the controller's, where the
// azure-vmss provider keeps its claims.
func providers(ctx context.Context, cfg *rest.Config, names []string, namespace string, clk clock.WithTicker, log *slog.Logger) (provider.Set, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the providers' client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the providers' dynamic client: %w", err)
	}
	named := make([]v1alpha1.ProviderName, len(names))
	for i, n := range names {
		named[i] = v1alpha1.ProviderName(n)
	}
	return registry.Start(ctx, named, provider.Env{Client: client, Dynamic: dyn, Namespace: namespace, Clock: clk, Log: log})
}

// awsQueue builds the AWS queue mode's reader (the SDK's default chain; the
// region from the queue's URL when AWS_REGION is not set).
func awsQueue(ctx context.Context, cfg *rest.Config, url string, clk clock.WithTicker, log *slog.Logger) (func(context.Context) error, error) {
	region := ""
	if m := sqsURL.FindStringSubmatch(url); m != nil { // validate checked it
		region = m[1]
	}
	awsCfg, err := awsclient.Process(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("--aws-queue-url: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the queue reader's client: %w", err)
	}
	r := awsqueue.New(sqs.NewFromConfig(awsCfg), autoscaling.NewFromConfig(awsCfg), client,
		awsqueue.Config{QueueURL: url, Clock: clk, Log: log.With("component", "aws-queue")})
	return r.Run, nil
}

// sqsURL is an SQS queue URL; the first group is its region.
var sqsURL = regexp.MustCompile(`^https://sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$`)
