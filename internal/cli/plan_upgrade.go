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

	"github.com/sluice-dev/sluice/internal/upgrade"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// runPlanUpgrade forecasts the upgrade of one pool to image, changing
// nothing. The pool's own spec.upgrade (or its defaults) sizes the batches.
func runPlanUpgrade(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, name, image string, format outputFormat, now time.Time) error {
	pool, members, err := getPool(ctx, kc, dyn, name)
	if err != nil {
		return err
	}
	if image == "" && pool.Spec.Template != nil {
		image = pool.Spec.Template.Image
	}
	if image == "" {
		return fmt.Errorf("--image is required: node pool %s's template names no image", name)
	}
	if err := checkImage(pool, image); err != nil {
		return err
	}
	pool = pool.DeepCopy()
	if pool.Spec.Upgrade == nil {
		pool.Spec.Upgrade = &v1alpha1.UpgradeSpec{}
	}
	f, err := forecast(ctx, kc, pool, members, image, now)
	if err != nil {
		return err
	}
	if format.structured() {
		return writeStructured(out, format, f)
	}
	writeForecast(out, f)
	return nil
}

// forecast predicts the upgrade of pool (with its spec.upgrade as given)
// to image from the cluster as it is now.
func forecast(ctx context.Context, kc kubernetes.Interface, pool *v1alpha1.NodePool, members []*corev1.Node, image string, now time.Time) (*upgrade.Forecast, error) {
	l, err := listCluster(ctx, kc)
	if err != nil {
		return nil, err
	}
	f, err := upgrade.Predict(upgrade.Input{Pool: pool, Members: members, Nodes: l.nodes.Items, Pods: l.pods.Items, PDBs: l.pdbs.Items,
		Image: image, Boot: bootEstimate(pool), Now: now})
	if err != nil {
		return nil, fmt.Errorf("node pool %s: %w", pool.Name, err)
	}
	return f, nil
}

// bootEstimate is how long the pool's provider takes to make a machine.
func bootEstimate(pool *v1alpha1.NodePool) time.Duration {
	if k := pool.Spec.Provider.Kwok; k != nil && k.BootDelay != nil {
		return k.BootDelay.Duration
	}
	return v1alpha1.DefaultKwokBootDelay
}

func writeForecast(out io.Writer, f *upgrade.Forecast) {
	fmt.Fprintf(out, "Upgrade of NodePool %s to %s: %d node(s) in %d batch(es) of up to %d (maxSurge %d, maxUnavailable %d)\n",
		f.Pool, f.Image, len(f.Nodes), len(f.Batches), f.BatchSize, f.Surge, f.Unavailable)
	if f.CappedBy != "" {
		fmt.Fprintf(out, "  the budget %s caps each batch below maxSurge + maxUnavailable: add a budget for reason Upgrade to go faster\n", f.CappedBy)
	}
	if len(f.Batches) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BATCH\tSTARTS\tNODES\tBOOT\tDRAIN\tSOAK\tTOTAL\tSLOWEST")
		for i, b := range f.Batches {
			fmt.Fprintf(tw, "  %d\t+%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, b.Start, shortList(b.Nodes), b.Boot, b.Drain, b.Soak, b.Total, b.Slowest)
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(out, "Predicted time: %s\n", f.Total)
	if len(f.Blockers) == 0 {
		fmt.Fprintln(out, "Blockers: none predicted")
	} else {
		fmt.Fprintln(out, "Blockers (nodes the upgrade will not take as things stand):")
		for _, b := range f.Blockers {
			node := b.Node
			if node == "" {
				node = "(pool)"
			}
			then := b.Outcome
			if b.At > 0 {
				then += fmt.Sprintf(", at about +%s", b.At)
			}
			fmt.Fprintf(out, "  %s  %s: %s\n    then: %s\n", node, b.Reason, b.Message, then)
			if b.Fix != "" {
				fmt.Fprintf(out, "    fix:  %s\n", b.Fix)
			}
		}
	}
	fmt.Fprintf(out, "Assumes: %s\n", strings.Join(f.Assumptions, "; "))
}

func shortList(names []string) string {
	if len(names) > 3 {
		return strings.Join(names[:3], ",") + fmt.Sprintf(",+%d", len(names)-3)
	}
	return strings.Join(names, ",")
}
