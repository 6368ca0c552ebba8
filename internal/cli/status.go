package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/poolstatus"
	"github.com/sluice-dev/sluice/internal/top"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// statusReport is what `sluice status -o json` prints. Its field names are
// part of the CLI contract.
type statusReport struct {
	// Time is when the report was computed; every count is as of then.
	Time  time.Time         `json:"time"`
	Pools []poolstatus.Pool `json:"pools"`
}

func newStatusCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status [POOL...]",
		Short: "Show each NodePool's nodes, what has drifted or expired, and what its budgets allow now",
		Long: `Status reads the NodePools and their nodes and computes, with the functions the controller
decides with, each pool's nodes, how many are out of service (disrupting), drifted from the
template, expired or expiring within 24h; its provider; whether it is paused or cannot be applied;
and, per disruption reason, how many more nodes the budgets allow now, which budget binds, and
when a scheduled budget next opens or closes. It needs no controller running.

-w (--watch) then keeps watching (informers: one list and one watch of nodes and NodePools, no
polling) and prints one line per change of a pool: its counts, readiness, or what its budgets
allow; with -o json, one JSON object per line. A lost connection is said on a line of its own, and
no change is printed until it is back. It runs until interrupted.

Exit status: 0 success, 1 an error (such as a pool that does not exist).`,
		Example: `  sluice status
  sluice status spot gpu
  sluice status -o json
  sluice status -w
  sluice status -w -o json spot`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			if watch {
				if format == outputYAML {
					return errors.New("-w prints one JSON object per line: use -o json (or text)")
				}
				link := top.NewLink(clock.RealClock{})
				kc, dyn, _, err := watchClients(cmd.Context(), client, link)
				if err != nil {
					return err
				}
				return runStatusWatch(cmd.Context(), cmd.OutOrStdout(), kc, dyn, link, args, format, clock.RealClock{})
			}
			kc, dyn, err := poolClients(cmd.Context(), client)
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args, format, clock.RealClock{}.Now())
		},
	}
	client.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the status, print one line per change of a pool until interrupted")
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}

func runStatus(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, names []string, format outputFormat, now time.Time) error {
	all, installed, err := listPools(ctx, dyn)
	if err != nil {
		return err
	}
	chosen, err := choosePools(all, names, installed)
	if err != nil {
		return err
	}
	report := statusReport{Time: now, Pools: []poolstatus.Pool{}}
	if len(chosen) > 0 {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		report.Pools = poolstatus.Of(chosen, nodes.Items, all, now)
	}
	if format.structured() {
		return writeStructured(out, format, report)
	}
	if len(report.Pools) == 0 {
		msg := "No NodePools found."
		if !installed {
			msg = "No NodePools found: the NodePool CRD is not installed (the sluice Helm chart installs it)."
		}
		fmt.Fprintln(out, msg)
		return nil
	}
	writeStatus(out, report, format == outputWide)
	return nil
}

// listPools lists the NodePools; installed is false when the cluster does
// not serve the NodePool CRD, which means no pools rather than an error.
// namedPools lists every pool and picks the named ones (every pool when no
// name is given), refusing a name no pool has.
func namedPools(ctx context.Context, dyn dynamic.Interface, names []string) (all []v1alpha1.NodePool, chosen []*v1alpha1.NodePool, err error) {
	all, installed, err := listPools(ctx, dyn)
	if err != nil {
		return nil, nil, err
	}
	chosen, err = choosePools(all, names, installed)
	return all, chosen, err
}

func listPools(ctx context.Context, dyn dynamic.Interface) (pools []v1alpha1.NodePool, installed bool, err error) {
	pools, err = nodepool.List(ctx, dyn)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	return pools, err == nil, err
}

// choosePools picks the named pools from all, in the order named; every pool
// when none is named.
func choosePools(all []v1alpha1.NodePool, names []string, installed bool) ([]*v1alpha1.NodePool, error) {
	if len(names) == 0 {
		out := make([]*v1alpha1.NodePool, len(all))
		for i := range all {
			out[i] = &all[i]
		}
		return out, nil
	}
	var out []*v1alpha1.NodePool
	for _, name := range names {
		found := false
		for i := range all {
			if all[i].Name == name {
				out, found = append(out, &all[i]), true
				break
			}
		}
		if !found {
			if !installed {
				return nil, fmt.Errorf("node pool %s not found: the NodePool CRD is not installed (the sluice Helm chart installs it)", name)
			}
			return nil, fmt.Errorf("node pool %s not found: list the pools with `sluice status` or `kubectl get nodepools`", name)
		}
	}
	return out, nil
}

// writeStatus prints one line per pool, like kubectl get, then each pool's
// budgets and problems.
// writeStatus prints the pools' table, then each pool's budgets; wide adds
// what the budgets allow now, per reason, as a column.
func writeStatus(out io.Writer, r statusReport, wide bool) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "NAME\tPROVIDER\tNODES\tDISRUPTING\tDRIFTED\tEXPIRED\tEXPIRING-24H\tPAUSED\tREADY"
	if wide {
		header += "\tALLOWED-NOW"
	}
	fmt.Fprintln(tw, header)
	for _, p := range r.Pools {
		ready := "True"
		if p.Problem != nil {
			ready = "False (" + p.Problem.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s", p.Name, providerColumn(p.Provider),
			p.Nodes, p.Disrupting, p.Drifted, p.Expired, p.ExpiringSoon, yesNo(p.Paused), ready)
		if wide {
			var allowed []string
			for _, b := range p.Budgets {
				allowed = append(allowed, fmt.Sprintf("%s=%d", b.Reason, b.Allowed))
			}
			fmt.Fprintf(tw, "\t%s", dash(strings.Join(allowed, ",")))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, p := range r.Pools {
		fmt.Fprintf(out, "\n%s:\n", p.Name)
		if p.Problem != nil {
			fmt.Fprintf(out, "  not Ready (%s): %s\n", p.Problem.Reason, p.Problem.Message)
		}
		if p.Provider.Group != "" {
			fmt.Fprintf(out, "  provider %s: %s\n", p.Provider.Name, p.Provider.Group)
		}
		if p.Provider.Managed && p.Provider.Ready != metav1.ConditionTrue {
			fmt.Fprintf(out, "  provider %s: ProviderReady %s (%s): %s\n", p.Provider.Name, p.Provider.Ready, p.Provider.Reason, p.Provider.Message)
		}
		writeBudgets(out, p, r.Time)
	}
}

// writeBudgets prints what the pool's budgets allow now, per reason, and
// after their next scheduled change.
func writeBudgets(out io.Writer, p poolstatus.Pool, now time.Time) {
	var change *disruption.BudgetChange
	for _, b := range p.Budgets {
		if b.Error != "" {
			fmt.Fprintf(out, "  budgets cannot be read, so they allow nothing: %s\n", b.Error)
			return
		}
		if change == nil {
			change = b.NextChange
		}
	}
	next := "no scheduled budget changes"
	if change != nil {
		next = "next change at " + timeAndDistance(change.At, now)
		if change.Budget != "" {
			next += ": the window of " + change.Budget + " " + opensOrCloses(change.Opens)
		}
	}
	fmt.Fprintf(out, "  budgets now (%s):\n", next)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "  REASON\tALLOWED\tBINDING BUDGET"
	if change != nil {
		header += "\tAFTER THE CHANGE"
	}
	fmt.Fprintln(tw, header)
	for _, b := range p.Budgets {
		binding := b.Binding
		if binding == "" {
			binding = "(none applies)"
		}
		line := fmt.Sprintf("  %s\t%d of %d\t%s", b.Reason, b.Allowed, b.Limit, binding)
		if b.NextChange != nil {
			line += fmt.Sprintf("\t%d allowed", b.NextChange.Allowed)
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

func opensOrCloses(opens bool) string {
	if opens {
		return "opens"
	}
	return "closes"
}

func providerColumn(p poolstatus.Provider) string {
	if !p.Managed {
		return string(p.Name)
	}
	switch p.Ready {
	case metav1.ConditionTrue:
		return string(p.Name) + " (Ready)"
	case metav1.ConditionFalse:
		return string(p.Name) + " (NotReady: " + p.Reason + ")"
	}
	return string(p.Name) + " (unknown)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// timeAndDistance is a time as RFC 3339, and how far it is from now.
func timeAndDistance(t, now time.Time) string {
	s := t.UTC().Format(time.RFC3339)
	if d := t.Sub(now); d >= 0 {
		return s + ", in " + duration.HumanDuration(d)
	}
	return s + ", " + duration.HumanDuration(now.Sub(t)) + " ago"
}

// poolClients builds the typed and dynamic clients status and explain read
// NodePools, nodes and pods with.
func poolClients(ctx context.Context, flags kube.ClientFlags) (kubernetes.Interface, dynamic.Interface, error) {
	kc, cfg, err := flags.Client(ctx)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client: %w", err)
	}
	return kc, dyn, nil
}
