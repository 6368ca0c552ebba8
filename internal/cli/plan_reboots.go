package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/rebootplan"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// cloudRebootDowntime is the forecast's guess at how long a cloud VM's
// reboot keeps its Node from Ready (OS shutdown, firmware, boot, kubelet).
const cloudRebootDowntime = 2 * time.Minute

// runPlanReboots forecasts, per pool, the reboots its nodes' OS asked for:
// rounds under the budget for RebootRequired and the reboot windows, and
// the nodes that wait and why. It changes nothing.
func runPlanReboots(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, names []string, format outputFormat, now time.Time) error {
	all, chosen, err := namedPools(ctx, dyn, names)
	if err != nil {
		return err
	}
	l, err := listCluster(ctx, kc)
	if err != nil {
		return err
	}
	forecasts := make([]*rebootplan.Forecast, 0, len(chosen))
	for _, pool := range chosen {
		f, err := rebootplan.Predict(rebootplan.Input{Pool: pool, Members: poolctrl.Members(pool, l.nodes.Items, all),
			Pods: l.pods.Items, PDBs: l.pdbs.Items, Downtime: rebootDowntime(pool), Now: now})
		if err != nil {
			return fmt.Errorf("node pool %s: %w", pool.Name, err)
		}
		forecasts = append(forecasts, f)
	}
	if format.structured() {
		return writeStructured(out, format, forecasts)
	}
	for i, f := range forecasts {
		if i > 0 {
			fmt.Fprintln(out)
		}
		writeRebootForecast(out, f, now)
	}
	return nil
}

// rebootDowntime is how long a reboot through the pool's provider keeps a
// node from Ready.
func rebootDowntime(pool *v1alpha1.NodePool) time.Duration {
	if pool.Spec.Provider.NameOrNone() == v1alpha1.ProviderKwok {
		return kwok.DefaultRebootDowntime
	}
	return cloudRebootDowntime
}

func writeRebootForecast(out io.Writer, f *rebootplan.Forecast, now time.Time) {
	fmt.Fprintf(out, "NodePool %s: %d node(s) asked for a reboot", f.Pool, f.Waiting)
	if f.Waiting == 0 {
		fmt.Fprintln(out)
		return
	}
	fmt.Fprintf(out, "; %d at a time (the budget for RebootRequired)\n", f.PerRound)
	if len(f.Rounds) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROUND\tSTARTS\tNODES\tDRAIN\tREBOOT\tSLOWEST")
		for i, r := range f.Rounds {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", i+1, timeAndDistance(r.Start, now), shortList(r.Nodes), r.Drain, r.Reboot, r.Slowest)
		}
		_ = tw.Flush()
		fmt.Fprintf(out, "Predicted time: %s (one node at a time, as kured goes: %s)\n", f.Total, f.OneAtATime)
	}
	if len(f.Held) > 0 {
		fmt.Fprintln(out, "Waiting, and why:")
		for _, h := range f.Held {
			fmt.Fprintf(out, "  %s  %s: %s\n", h.Node, h.Reason, h.Message)
		}
	}
	fmt.Fprintf(out, "Assumes: %s\n", strings.Join(f.Assumptions, "; "))
}
