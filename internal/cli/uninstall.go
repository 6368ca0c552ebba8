package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/uninstall"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func newUninstallCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	opts := uninstall.Options{Clock: clock.RealClock{}, ClaimConfigMaps: []string{azurevmss.ClaimsConfigMap, aksagentpool.ClaimsConfigMap, clusterapi.ClaimsConfigMap}}
	var output string
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what sluice put on the cluster, and nothing a person asked for",
		Long: "Uninstall stops the controller (scales its Deployment to 0) and the agents (deletes their\n" +
			"DaemonSet), waits until no controller holds the leader Lease, then takes off every node the\n" +
			contract.FinalizerTermination + " finalizer (so kubectl delete node completes), the taints " + contract.TaintMaintenance + ",\n" +
			contract.TaintConsolidation + " and " + contract.TaintUnregistered + ", the cordons sluice's controllers placed (a\n" +
			"person's cordon, or one a person's sluice drain placed, stays) and the annotations that steer\n" +
			"sluice's controllers; then deletes the drain timelines, the providers' claims and the Lease.\n" +
			"NodePools, their CRD and cloud machines are left. The chart runs it before helm uninstall\n" +
			"removes anything (docs/operations.md).",
		Example: `  sluice uninstall --dry-run
  sluice uninstall -n sluice-system -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			if opts.Namespace == "" || opts.Deployment == "" || opts.DaemonSet == "" || opts.Lease == "" {
				return fmt.Errorf("--namespace, --deployment, --daemonset and --lease must not be empty")
			}
			if opts.StopTimeout <= 0 {
				return fmt.Errorf("--stop-timeout %s: must be positive", opts.StopTimeout)
			}
			return runUninstall(cmd.Context(), cmd.OutOrStdout(), client, opts, format)
		},
	}
	client.AddFlags(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVarP(&opts.Namespace, "namespace", "n", envOr("POD_NAMESPACE", "sluice-system"), "the namespace sluice runs in (env POD_NAMESPACE)")
	fs.StringVar(&opts.Deployment, "deployment", "sluice-controller", "the controller's Deployment")
	fs.StringVar(&opts.DaemonSet, "daemonset", "sluice-agent", "the agents' DaemonSet")
	fs.StringVar(&opts.Lease, "lease", "sluice-controller", "the controller's leader-election Lease")
	fs.DurationVar(&opts.StopTimeout, "stop-timeout", 2*time.Minute, "how long to wait for the controller to stop; past it nothing on the nodes is changed")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "list what would be removed, change nothing")
	fs.StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}

func runUninstall(ctx context.Context, out io.Writer, flags kube.ClientFlags, opts uninstall.Options, format outputFormat) error {
	c, cfg, err := flags.Client(ctx)
	if err != nil {
		return err
	}
	if opts.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	r, err := uninstall.Run(ctx, c, opts)
	if r != nil {
		if format.structured() {
			if werr := writeStructured(out, format, r); werr != nil && err == nil {
				err = werr
			}
		} else {
			writeUninstall(out, r)
		}
	}
	return err
}

// writeUninstall prints the report for people: what stopped, each node's
// change, what was deleted and what stays.
func writeUninstall(out io.Writer, r *uninstall.Report) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
		fmt.Fprintln(out, "dry run: nothing changed")
	}
	for _, s := range r.Stopped {
		fmt.Fprintf(out, "stopped  %s\n", s)
	}
	for _, n := range r.Nodes {
		var parts []string
		if n.Finalizer {
			parts = append(parts, "finalizer")
		}
		if len(n.Taints) > 0 {
			parts = append(parts, "taints "+strings.Join(n.Taints, ","))
		}
		if n.Uncordoned != "" {
			parts = append(parts, "cordon (by "+n.Uncordoned+")")
		}
		if len(n.Annotations)+len(n.Labels) > 0 {
			parts = append(parts, fmt.Sprintf("%d annotation(s)/label(s)", len(n.Annotations)+len(n.Labels)))
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "node     %s: %s %s", n.Node, verb, strings.Join(parts, "; "))
			if n.MidDrain {
				fmt.Fprint(out, " (its drain stops where it was)")
			}
			fmt.Fprintln(out)
		}
		if n.Kept != "" {
			fmt.Fprintf(out, "node     %s: kept: %s\n", n.Node, n.Kept)
		}
	}
	for _, m := range r.Machines {
		fmt.Fprintf(out, "machine  %s: %s sluice's pre-drain hook (Cluster API drains it itself)\n", m, verb)
	}
	for _, d := range r.Deleted {
		fmt.Fprintf(out, "deleted  %s\n", d)
	}
	for _, k := range r.Kept {
		fmt.Fprintf(out, "kept     %s\n", k)
	}
}
