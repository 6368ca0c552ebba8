package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/consolidation"
	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// poolPlan is one pool's part of `sluice plan disruption -o json`.
type poolPlan struct {
	Pool     string                `json:"pool"`
	Provider v1alpha1.ProviderName `json:"provider"`
	// Managed says whether sluice makes the pool's machines; a pool it
	// does not is only reported on, and has no commands.
	Managed  bool             `json:"managed"`
	Commands []poolctrl.Would `json:"commands"`
}

// runPlanDisruption prints, per pool, the commands the controller's pass
// would carry out now: the controller's own pass (poolctrl.Plan), under
// --dry-run, with consolidation's command from consolidation.Decide.
func runPlanDisruption(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, names []string, format outputFormat, now time.Time) error {
	all, chosen, err := namedPools(ctx, dyn, names)
	if err != nil {
		return err
	}
	cl, err := readCluster(ctx, kc)
	if err != nil {
		return err
	}
	nodes := make([]corev1.Node, len(cl.in.Nodes))
	for i, n := range cl.in.Nodes {
		nodes[i] = *n
	}
	podsOn := map[string][]*corev1.Pod{}
	for _, p := range cl.in.Pods {
		podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
	}
	plans := make([]poolPlan, 0, len(chosen))
	for _, pool := range chosen {
		decide := func() *consolidation.Command { return cl.plan(pool, all, now).Command }
		cmds, err := poolctrl.Plan(pool, all, nodes, func(n string) ([]*corev1.Pod, error) { return podsOn[n], nil }, decide, now)
		if err != nil {
			return fmt.Errorf("planning node pool %s: %w", pool.Name, err)
		}
		plans = append(plans, poolPlan{Pool: pool.Name, Provider: pool.Spec.Provider.NameOrNone(), Managed: pool.Spec.Provider.Manages(), Commands: cmds})
	}
	if format.structured() {
		return writeStructured(out, format, plans)
	}
	methods := make([]string, len(disruption.Methods))
	for i, m := range disruption.Methods {
		methods[i] = string(m.Reason)
	}
	fmt.Fprintf(out, "The methods, in order: %s (each spends what the budgets leave after the ones before)\n", strings.Join(methods, ", "))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, m := range disruption.Methods {
		again := ""
		if m.Revalidate {
			again = "; carried out once a second look decides the same"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", m.Reason, m.Mode, m.Takes, again)
	}
	_ = tw.Flush()
	for _, p := range plans {
		fmt.Fprintf(out, "\nNodePool %s (provider %s):\n", p.Pool, p.Provider)
		switch {
		case !p.Managed:
			fmt.Fprintf(out, "  sluice makes no machines for it: it reports drifted and expired nodes and replaces none (sluice status %s)\n", p.Pool)
		case len(p.Commands) == 0:
			fmt.Fprintln(out, "  nothing now")
		default:
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			for i, c := range p.Commands {
				fmt.Fprintf(tw, "  %d.\t%s\t%s\t%s\n", i+1, c.Method, c.Object, c.Command)
			}
			_ = tw.Flush()
		}
	}
	return nil
}
