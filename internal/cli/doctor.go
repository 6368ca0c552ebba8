package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/importer"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/doctor"
)

func newDoctorCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	var selector, output string
	var stuckAfter time.Duration
	cmd := &cobra.Command{
		Use:   "doctor [node NAME... | -l SELECTOR]",
		Short: "Find what will make a drain hang, lose data or run out of time, before it starts",
		Long: `Doctor checks PodDisruptionBudgets (ones that can never allow an eviction, overlap, select
nothing or are at zero now), pods a drain refuses or loses (no controller, emptyDir, hostPath,
do-not-disrupt, stuck terminating), shutdowns longer than a spot node's notice, and whether each
node's pods would fit elsewhere if it were drained now. Each finding names the object, the reason
code and what to change.

Exit status: 0 no errors, 3 at least one error (a drain would hang or lose data), 1 doctor failed.`,
		Example: `  sluice doctor
  sluice doctor node aks-user-12345678-vmss000002
  sluice doctor -l kubernetes.azure.com/agentpool=user -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			var targets []string
			switch {
			case len(args) > 0 && args[0] != "node":
				return fmt.Errorf("unknown argument %q: use `sluice doctor`, `sluice doctor node NAME...` or -l SELECTOR", args[0])
			case len(args) == 1:
				return fmt.Errorf("`sluice doctor node` needs at least one node name")
			case len(args) > 1 && selector != "":
				return fmt.Errorf("name nodes or give --selector, not both")
			case len(args) > 1:
				targets = args[1:]
			}
			if stuckAfter <= 0 {
				return fmt.Errorf("--stuck-after %s: must be positive", stuckAfter)
			}
			if selector != "" {
				if _, err := parseSelector("selector", selector); err != nil {
					return err
				}
			}
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), client, selector, targets, format, stuckAfter)
		},
	}
	client.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "check the nodes matching this label selector")
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", time.Minute, "a terminating pod held by finalizers this long past its grace period is stuck")
	return cmd
}

// doctorChunk is the pods a page of doctor's list holds: kubectl's
// --chunk-size default.
const doctorChunk = 500

// allPods lists every pod of the cluster in pages of chunk.
func allPods(ctx context.Context, c kubernetes.Interface, chunk int64) (*corev1.PodList, error) {
	all := &corev1.PodList{}
	opts := metav1.ListOptions{Limit: chunk}
	for {
		page, err := c.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		if page.Continue == "" {
			return all, nil
		}
		opts.Continue = page.Continue
	}
}

func runDoctor(ctx context.Context, out io.Writer, flags kube.ClientFlags, selector string, targets []string, format outputFormat, stuckAfter time.Duration) error {
	c, cfg, err := flags.Client(ctx)
	if err != nil {
		return err
	}
	if selector != "" {
		if targets, err = nodesMatching(ctx, c, selector, 0); err != nil {
			return err
		}
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	known := map[string]bool{}
	for _, n := range nodes.Items {
		known[n.Name] = true
	}
	for _, t := range targets {
		if !known[t] {
			return fmt.Errorf("node %s not found", t)
		}
	}
	// In pages, as kubectl lists: each page a request of its own, within
	// --request-timeout, where one list of 150,000 pods was not.
	pods, err := allPods(ctx, c, doctorChunk)
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	pdbs, err := c.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	daemonSets, err := c.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing DaemonSets: %w", err)
	}
	pools, err := poolFindings(ctx, cfg, nodes.Items, pods.Items)
	if err != nil {
		return err
	}
	report := doctor.Diagnose(doctor.Input{Nodes: nodes.Items, Pods: pods.Items, PDBs: pdbs.Items, DaemonSets: daemonSets.Items,
		Targets: targets, Now: clock.RealClock{}.Now(), StuckAfter: stuckAfter, Extra: pools})
	if format.structured() {
		if err := writeStructured(out, format, report); err != nil {
			return err
		}
	} else {
		writeDoctorReport(out, report)
	}
	if report.Errors > 0 {
		return exitError{code: ExitBlocked, err: fmt.Errorf("%d error(s): a drain would hang or lose data", report.Errors)}
	}
	return nil
}

func writeDoctorReport(out io.Writer, r doctor.Report) {
	scope := "the cluster"
	if len(r.Nodes) > 0 && len(r.Nodes) <= 5 {
		scope = strings.Join(r.Nodes, ", ")
	} else if len(r.Nodes) > 5 {
		scope = fmt.Sprintf("%d nodes", len(r.Nodes))
	}
	fmt.Fprintf(out, "checked %s: %d error(s), %d warning(s)\n", scope, r.Errors, r.Warnings)
	for _, sev := range []doctor.Severity{doctor.SeverityError, doctor.SeverityWarning, doctor.SeverityInfo} {
		var rows []doctor.Finding
		for _, f := range r.Findings {
			if f.Severity == sev {
				rows = append(rows, f)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s (%d)\n", strings.ToUpper(string(sev))+"S", len(rows))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, f := range rows {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Code, f.Object, f.Message)
			if f.Fix != "" {
				fmt.Fprintf(tw, "  \t\tfix: %s\n", f.Fix)
			}
		}
		_ = tw.Flush()
	}
}

// poolFindings are the NodePools' own checks (nodepool.Coexistence): none
// on a cluster without the NodePool CRD.
func poolFindings(ctx context.Context, cfg *rest.Config, nodes []corev1.Node, pods []corev1.Pod) ([]doctor.Finding, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a client: %w", err)
	}
	pools, installed, err := listPools(ctx, dyn)
	if apierrors.IsForbidden(err) {
		return []doctor.Finding{{Severity: doctor.SeverityInfo, Code: "NodePoolsHidden", Object: "NodePools",
			Message: "not allowed to list NodePools, so the pools' own checks did not run: " + err.Error()}}, nil
	}
	if err != nil || !installed {
		return nil, err
	}
	return nodepool.CoexistenceWith(pools, nodes, pods, quietKarpenterPools(ctx, dyn)), nil
}

// quietKarpenterPools names the Karpenter NodePools whose disruption is
// turned off, whose nodes a sluice pool may then take without doctor's
// warning; none when the cluster serves no Karpenter NodePools or they
// cannot be read (the warning then stands, erring toward saying it).
func quietKarpenterPools(ctx context.Context, dyn dynamic.Interface) map[string]bool {
	list, err := dyn.Resource(karpenterNodePools).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	quiet := map[string]bool{}
	for _, it := range list.Items {
		if importer.KarpenterDisruptionOff(it.Object) {
			quiet[it.GetName()] = true
		}
	}
	return quiet
}
