package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/agent"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

type agentFlags struct {
	client   kube.ClientFlags
	logs     logFlags
	node     string
	cloud    string
	endpoint string
	interval time.Duration
	timeout  time.Duration
	endAfter time.Duration
	metrics  string
	cordon   bool
}

func newAgentCommand() *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Watch this machine's metadata service and report maintenance events on its Node",
		Long: "The agent runs on every node (a DaemonSet). It reads the cloud's instance metadata service\n" +
			"(Azure Scheduled Events, AWS IMDSv2, GCP metadata) and writes the maintenance events it sees\n" +
			"onto its own Node; when the controller asks, it approves an event with the platform. When the\n" +
			"machine is being taken (Preempt, Terminate) it cordons its node in that same write, for the\n" +
			"controller to own. It can write nothing else: it holds no right to evict pods or change other nodes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd.Context(), f) },
	}
	fs := cmd.Flags()
	f.client.OwnVerbosity = true
	f.client.AddFlags(fs)
	f.logs.addFlags(fs)
	fs.StringVar(&f.node, "node", envOr("NODE_NAME", ""), "the node this agent runs on (env NODE_NAME)")
	fs.StringVar(&f.cloud, "cloud", envOr("SLUICE_CLOUD", "auto"), "azure, aws, gcp, or auto to read it from the node's providerID (env SLUICE_CLOUD)")
	fs.StringVar(&f.endpoint, "imds-endpoint", envOr("SLUICE_IMDS_ENDPOINT", ""), "metadata service URL, e.g. http://127.0.0.1:PORT for an emulator (env SLUICE_IMDS_ENDPOINT; default: the cloud's own)")
	fs.DurationVar(&f.interval, "poll-interval", maintenance.DefaultPollInterval, "how often to poll (Azure and AWS; GCP long-polls)")
	fs.DurationVar(&f.timeout, "imds-timeout", 2*time.Second, "bound on each metadata request")
	fs.DurationVar(&f.endAfter, "end-confirmation", maintenance.DefaultEndConfirmation.For,
		"how long an event must be missing from the metadata answers (two at least) before it is over")
	fs.BoolVar(&f.cordon, "cordon-on-preemption", true, "cordon the node in the write that first reports a Preempt or Terminate, "+
		"owned by the event ("+contract.AnnotationCordonedBy+"=maintenance/<id>) so the controller lifts it when the pool's action is None; "+
		"false leaves every cordon to the controller (set it false when the controller runs with --dry-run)")
	fs.StringVar(&f.metrics, "metrics-bind-address", "0", "address serving Prometheus /metrics, e.g. :9730; 0 turns it off (the agent runs on the node's network: pick a free port)")
	return cmd
}

func (f *agentFlags) validate() error {
	var errs []error
	if f.node == "" {
		errs = append(errs, errors.New("--node is required (or NODE_NAME, from the downward API)"))
	}
	switch f.cloud {
	case "auto", "azure", "aws", "gcp":
	default:
		errs = append(errs, fmt.Errorf("--cloud %q: use azure, aws, gcp or auto", f.cloud))
	}
	if f.interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--poll-interval %s: use 100ms or more", f.interval))
	}
	if f.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--imds-timeout %s: must be positive", f.timeout))
	}
	if f.endAfter < 0 {
		errs = append(errs, fmt.Errorf("--end-confirmation %s: use 0s or more", f.endAfter))
	}
	if err := checkBindAddress("--metrics-bind-address", f.metrics); err != nil {
		errs = append(errs, err)
	}
	if f.endpoint != "" {
		if u, err := url.Parse(f.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--imds-endpoint %q: give an http:// URL such as http://169.254.169.254 (or leave it empty for the cloud's own)", f.endpoint))
		}
	}
	return errors.Join(errs...)
}

func runAgent(ctx context.Context, f *agentFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := f.logs.logger()
	if err != nil {
		return err
	}
	client, _, err := f.client.ServiceClient(ctx, clock.RealClock{}, log)
	if err != nil {
		return stoppedIsNoError(ctx, err)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", f.node, err)
	}
	cloud := maintenance.Source(f.cloud)
	if f.cloud == "auto" {
		if cloud, err = agent.CloudOf(node.Spec.ProviderID); err != nil {
			return err
		}
	}
	watcher, err := agent.NewWatcher(cloud, f.endpoint, node.Spec.ProviderID, clock.RealClock{}, f.interval, f.timeout)
	if err != nil {
		return err
	}
	approver, _ := watcher.(maintenance.Approver)
	reg := metricsRegistry()
	metrics := agent.NewMetrics(reg)
	if err := serveMetrics(ctx, f.metrics, reg, log); err != nil {
		return err
	}
	log.Info("agent started", "node", f.node, "cloud", cloud, "approves", approver != nil, "cordonOnPreemption", f.cordon)
	ends := maintenance.EndConfirmation{Answers: maintenance.DefaultEndConfirmation.Answers, For: f.endAfter}
	return agent.New(client, log, agent.Config{Node: f.node, Source: cloud, Watcher: watcher, Approver: approver,
		EndConfirmation: ends, Clock: clock.RealClock{}, Metrics: metrics, CordonInvoluntary: f.cordon}).Run(ctx)
}
