package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
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
	reboot   rebootFlags
}

// rebootFlags say how the agent reads the OS's reboot-required sentinel.
type rebootFlags struct {
	sentinel string
	command  string
	period   time.Duration
}

// minRebootCheckPeriod keeps a sentinel command from running near
// continuously on every node.
const minRebootCheckPeriod = 5 * time.Second

func newAgentCommand() *cobra.Command { return (&agentFlags{}).command() }

// command is `sluice agent`, its flags read into f.
func (f *agentFlags) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Watch this machine's metadata service and report maintenance events on its Node",
		Long: "The agent runs on every node (a DaemonSet). It reads the cloud's instance metadata service\n" +
			"(Azure Scheduled Events, AWS IMDSv2, GCP metadata) and writes the maintenance events it sees\n" +
			"onto its own Node; when the controller asks, it approves an event with the platform. When the\n" +
			"machine is being taken (Preempt, Terminate) it cordons its node in that same write, for the\n" +
			"controller to own. It reports when the OS asks for a reboot (its reboot-required sentinel) as\n" +
			contract.AnnotationRebootRequired + ". It can write nothing else: it holds no right to evict pods,\n" +
			"reboot, or change other nodes.",
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
	fs.StringVar(&f.reboot.sentinel, "reboot-sentinel", agent.DefaultRebootSentinel, "a file whose existence means the OS needs a reboot "+
		"(Ubuntu's unattended-upgrades writes the default), reported as "+contract.AnnotationRebootRequired+"; empty turns the check off and leaves that annotation to people")
	fs.StringVar(&f.reboot.command, "reboot-sentinel-command", "", `a command that exits 0 when the OS needs a reboot, instead of --reboot-sentinel, `+
		`e.g. "/usr/local/bin/needs-reboot --quiet"; split on spaces, no shell; run in the agent's container, for at most `+agent.DefaultSentinelTimeout.String())
	fs.DurationVar(&f.reboot.period, "reboot-check-period", agent.DefaultRebootCheckPeriod, "how often to read the reboot sentinel")
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
	errs = append(errs, f.reboot.validate()...)
	if f.endpoint != "" {
		if u, err := url.Parse(f.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--imds-endpoint %q: give an http:// URL such as http://169.254.169.254 (or leave it empty for the cloud's own)", f.endpoint))
		}
	}
	return errors.Join(errs...)
}

func (f rebootFlags) validate() []error {
	var errs []error
	switch {
	case f.command != "" && f.sentinel != agent.DefaultRebootSentinel:
		errs = append(errs, fmt.Errorf("--reboot-sentinel-command %q and --reboot-sentinel %q: give one; the command replaces the file", f.command, f.sentinel))
	case f.command != "" && len(strings.Fields(f.command)) == 0:
		errs = append(errs, fmt.Errorf("--reboot-sentinel-command %q: give a command, such as \"/usr/local/bin/needs-reboot --quiet\"", f.command))
	case f.command == "" && f.sentinel != "" && !filepath.IsAbs(f.sentinel):
		errs = append(errs, fmt.Errorf("--reboot-sentinel %q: give an absolute path such as %s, or empty to turn the check off", f.sentinel, agent.DefaultRebootSentinel))
	}
	if f.period < minRebootCheckPeriod {
		errs = append(errs, fmt.Errorf("--reboot-check-period %s: use %s or more", f.period, minRebootCheckPeriod))
	}
	return errs
}

// check is the agent's reboot check the flags ask for.
func (f rebootFlags) check() agent.RebootCheck {
	rc := agent.RebootCheck{Period: f.period, Clock: clock.RealClock{}}
	switch {
	case f.command != "":
		rc.Sentinel = agent.CommandSentinel{Args: strings.Fields(f.command)}
	case f.sentinel != "":
		rc.Sentinel = agent.FileSentinel{Path: f.sentinel}
	}
	return rc
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
	reboot := f.reboot.check()
	rebootSentinel := "off"
	if reboot.Sentinel != nil {
		rebootSentinel = reboot.Sentinel.String()
	}
	log.Info("agent started", "node", f.node, "cloud", cloud, "approves", approver != nil, "cordonOnPreemption", f.cordon,
		"rebootSentinel", rebootSentinel, "rebootCheckPeriod", reboot.Period)
	ends := maintenance.EndConfirmation{Answers: maintenance.DefaultEndConfirmation.Answers, For: f.endAfter}
	return agent.New(client, log, agent.Config{Node: f.node, Source: cloud, Watcher: watcher, Approver: approver,
		EndConfirmation: ends, Clock: clock.RealClock{}, Metrics: metrics, CordonInvoluntary: f.cordon, Reboot: reboot}).Run(ctx)
}
