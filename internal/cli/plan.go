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
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/consolidation"
	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func newPlanCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	var output, image string
	cmd := &cobra.Command{
		Use:   "plan [disruption] [POOL...] | plan consolidation [POOL...] | plan upgrade POOL --image IMAGE | plan reboots [POOL...]",
		Short: "Print what sluice would disrupt now, in order, and why the other nodes stay",
		Long: `Plan disruption (plain "sluice plan" too) runs the controller's own pass over each NodePool, as
if it ran the pool's provider, under --dry-run, and prints the commands it would carry out now, in
the order of its methods (Unhealthy, Upgrade, Drifted, Expired, RebootRequired, Empty, Underutilized), each within what the
budgets leave after the ones before: the node, and what would be done to it and why.

Plan consolidation runs the controller's own consolidation pass against the cluster as it is now and prints,
per NodePool, the command it would carry out (nodes deleted or replaced, the new node's type, cost
per hour before and after, the pods that move and where), then each node it would leave alone and
why (budget, PodDisruptionBudget, do-not-disrupt, recently changed, no cheaper fit, savings below
minSavings...). It changes nothing and needs no controller running. The controller acts on a plan
only when a second pass, --consolidation-validation-delay later, makes the same one.

Plan upgrade forecasts an image upgrade of one pool with its spec.upgrade settings (or their
defaults), before anything changes: the batches, the predicted time of each and of the whole (from
the provider's boot time, the pods' grace periods and readiness delays, the PodDisruptionBudgets'
waves and the soak), and every node predicted to block (a budget that can never allow, do-not-disrupt,
no room for its pods even with the surge nodes), with the fix.

Plan reboots forecasts the reboots the pools' nodes asked for (the agent's reboot-required
sentinel, docs/health.md): rounds as wide as the budget for RebootRequired allows, each started
inside a reboot window, each its slowest drain plus the reboot; the time beside one node at a
time (kured's pace); and each node that will wait, and why (do-not-disrupt, a blocking pod, no
budget, no window, no spec.reboot).

Exit status: 0 success, 1 an error (such as a pool that does not exist).`,
		Example: `  sluice plan
  sluice plan disruption batch -o json
  sluice plan consolidation
  sluice plan consolidation batch -o json
  sluice plan upgrade batch --image AKSUbuntu-2204gen2containerd-202612.01.0
  sluice plan reboots`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				args = []string{"disruption"}
			}
			switch args[0] {
			case "disruption", "consolidation", "upgrade", "reboots":
			default:
				return fmt.Errorf("sluice plans disruption, consolidation, upgrades or reboots, not %q: `sluice plan [disruption] [POOL...]`, `sluice plan consolidation [POOL...]`, `sluice plan upgrade POOL --image IMAGE` or `sluice plan reboots [POOL...]`", args[0])
			}
			if args[0] == "upgrade" && len(args) != 2 {
				return errors.New("name one pool: `sluice plan upgrade POOL --image IMAGE`")
			}
			kc, dyn, err := poolClients(cmd.Context(), client)
			if err != nil {
				return err
			}
			if args[0] == "disruption" {
				return runPlanDisruption(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[1:], format, clock.RealClock{}.Now())
			}
			if args[0] == "reboots" {
				return runPlanReboots(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[1:], format, clock.RealClock{}.Now())
			}
			if args[0] == "upgrade" {
				return runPlanUpgrade(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[1], image, format, clock.RealClock{}.Now())
			}
			return runPlan(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[1:], format, clock.RealClock{}.Now())
		},
	}
	client.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	cmd.Flags().StringVar(&image, "image", "", "plan upgrade: the image to upgrade to (default the template's)")
	return cmd
}

func runPlan(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, names []string, format outputFormat, now time.Time) error {
	all, chosen, err := namedPools(ctx, dyn, names)
	if err != nil {
		return err
	}
	cl, err := readCluster(ctx, kc)
	if err != nil {
		return err
	}
	plans := make([]*consolidation.Plan, 0, len(chosen))
	for _, p := range chosen {
		plans = append(plans, cl.plan(p, all, now))
	}
	if format.structured() {
		return writeStructured(out, format, plans)
	}
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(out)
		}
		writePlan(out, p, now)
	}
	return nil
}

// snapshot is what a consolidation pass reads, listed once for every pool.
type snapshot struct {
	in consolidation.Input
}

// listed is what plans read: every node, pod and PodDisruptionBudget.
type listed struct {
	nodes *corev1.NodeList
	pods  *corev1.PodList
	pdbs  *policyv1.PodDisruptionBudgetList
}

func listCluster(ctx context.Context, kc kubernetes.Interface) (*listed, error) {
	var (
		l   listed
		err error
	)
	if l.nodes, err = kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if l.pods, err = kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if l.pdbs, err = kc.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	return &l, nil
}

func readCluster(ctx context.Context, kc kubernetes.Interface) (*snapshot, error) {
	l, err := listCluster(ctx, kc)
	if err != nil {
		return nil, err
	}
	nodes, pods, pdbs := l.nodes, l.pods, l.pdbs
	c := &snapshot{}
	for i := range nodes.Items {
		c.in.Nodes = append(c.in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName != "" {
			c.in.Pods = append(c.in.Pods, &pods.Items[i])
		}
	}
	for i := range pdbs.Items {
		c.in.PDBs = append(c.in.PDBs, &pdbs.Items[i])
	}
	return c, nil
}

// plan runs the pass for one pool, with its budgets as the controller
// counts them. Pod departures are not known here (the controller watches
// them), so a node a pod just left may be planned that the controller
// holds back for consolidateAfter.
func (c *snapshot) plan(pool *v1alpha1.NodePool, all []v1alpha1.NodePool, now time.Time) *consolidation.Plan {
	in := c.in
	nodes := make([]corev1.Node, len(in.Nodes))
	for i, n := range in.Nodes {
		nodes[i] = *n
	}
	in.Pool, in.Members, in.Now = pool, poolctrl.Members(pool, nodes, all), now
	// The controller's view of the pool. A budget it cannot read leaves
	// nothing allowed (the pool shows Ready=False for it).
	v := disruption.Observe(pool, in.Members, now)
	in.Allowed, _ = consolidation.Allowed(pool, v.Size, v.Disrupting, now)
	plan := consolidation.Decide(in)
	if !pool.Spec.Provider.Manages() && plan.Command != nil {
		plan.Blocked = append(plan.Blocked, consolidation.Blocker{Reason: consolidation.BlockedDisabled,
			Message: fmt.Sprintf("NodePool %s has no provider sluice runs: this is what it would do, and it does nothing", pool.Name)})
	}
	return plan
}

// writePlan prints one pool's plan.
func writePlan(out io.Writer, p *consolidation.Plan, now time.Time) {
	fmt.Fprintf(out, "NodePool %s: %d nodes, $%.4f/h\n", p.Pool, p.Nodes, p.CostPerHour)
	if c := p.Command; c != nil {
		fmt.Fprintf(out, "Would do: %s\n", c)
		fmt.Fprintf(out, "  cost of the nodes taken away $%.4f/h, of the new node $%.4f/h; the pool after: $%.4f/h\n",
			c.CostBefore, c.CostAfter, p.CostPerHour-c.Savings())
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		if len(c.Moves) > 0 {
			fmt.Fprintln(tw, "  POD\tFROM\tTO")
		}
		for i, m := range c.Moves {
			if i == 20 {
				fmt.Fprintf(tw, "  ... and %d more\t\t\n", len(c.Moves)-20)
				break
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Pod, m.From, m.To)
		}
		_ = tw.Flush()
		if len(p.Next) > 0 {
			fmt.Fprintf(out, "Next rounds, as the budgets allow: %s (the controller marks them %s=%s:%s, so pods moved now stay off them)\n",
				strings.Join(p.Next, ", "), poolctrl.SteerTaint.Key, poolctrl.SteerTaint.Value, poolctrl.SteerTaint.Effect)
		}
	} else {
		fmt.Fprintln(out, "Would do: nothing")
	}
	if len(p.Blocked) == 0 {
		return
	}
	fmt.Fprintln(out, "Left alone:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, b := range p.Blocked {
		msg := b.Message
		if !b.Until.IsZero() {
			msg += " (until " + timeAndDistance(b.Until, now) + ")"
		}
		node := b.Node
		if node == "" {
			node = "(pool)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", node, b.Reason, strings.ReplaceAll(msg, "\n", " "))
	}
	_ = tw.Flush()
}
