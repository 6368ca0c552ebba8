package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/consolidation"
	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func newExplainCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	var output, picture, controllerNamespace string
	cmd := &cobra.Command{
		Use:   "explain node NODE",
		Short: "Say why sluice is or is not disrupting a node, what holds it, and what would let it go",
		Long: `Explain reads a node, its NodePool, the pool's other nodes and the pods on the node, and says
with the functions the controller decides with: which pool the node follows (or none: defaults
only), whether sluice manages the pool's machines, the node's disruption and maintenance records,
who cordoned it and whether a drain holds it, how it differs from its pool's template, when it
expires, what protects it, and what the budget for its reason allows now and when that changes.
It ends with a verdict: will be replaced, waits for the budget, protected, paused, reported only.
It needs no controller running.

--timeline FILE.html draws the node's last drain by the controller (a maintenance event, expiry,
drift, consolidation, an upgrade) as the page ` + "`sluice drain --timeline`" + ` writes: the controller
keeps it in the ConfigMap sluice-timeline-NODE of its namespace for --timeline-retention (24h).
It works for a node that no longer exists, such as a preempted spot node.

Exit status: 0 success, 1 an error (such as a node that does not exist, or no timeline kept).`,
		Example: `  sluice explain node aks-user-12345678-vmss000002
  sluice explain node aks-user-12345678-vmss000002 -o json
  sluice explain node aks-spot-12345678-vmss000007 --timeline preempted.html`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			name, err := explainTarget(args)
			if err != nil {
				return err
			}
			if err := checkTimelinePath(picture); err != nil {
				return err
			}
			if picture != "" && controllerNamespace == "" {
				return errors.New("--controller-namespace is empty: name the namespace sluice's controller runs in")
			}
			kc, dyn, err := poolClients(cmd.Context(), client)
			if err != nil {
				return err
			}
			// The node's kept drain is read once: for the Last drain line,
			// and for the page.
			kept, loadErr := loadKept(cmd.Context(), kc, controllerNamespace, name)
			err = runExplain(cmd.Context(), cmd.OutOrStdout(), kc, dyn, name, lastDrainOf(kept, name), format, clock.RealClock{}.Now())
			if picture == "" || err != nil && !errors.Is(err, errNodeNotFound) {
				return err
			}
			return explainTimeline(cmd.ErrOrStderr(), kept, loadErr, controllerNamespace, name, picture, err != nil)
		},
	}
	client.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	cmd.Flags().StringVar(&picture, "timeline", "", "also write the node's last drain by the controller as one self-contained HTML page to this file")
	cmd.Flags().StringVar(&controllerNamespace, "controller-namespace", "sluice-system", "the namespace sluice's controller runs in, where it keeps the drains' timelines")
	return cmd
}

// explainTarget reads `node NAME` from the arguments.
func explainTarget(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", errors.New("name what to explain: `sluice explain node NODE`")
	case args[0] != "node":
		return "", fmt.Errorf("cannot explain %q: sluice explains nodes, as in `sluice explain node NODE`", args[0])
	case len(args) == 1:
		return "", errors.New("`sluice explain node` needs a node name: `sluice explain node NODE` (list them with `kubectl get nodes`)")
	case len(args) > 2:
		return "", fmt.Errorf("`sluice explain node` explains one node at a time; got %d: %s", len(args)-1, strings.Join(args[1:], ", "))
	}
	return args[1], nil
}

func runExplain(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, name string, last *lastDrain, format outputFormat, now time.Time) error {
	node, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s %w: list the nodes with `kubectl get nodes`", name, errNodeNotFound)
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	all, _, err := listPools(ctx, dyn)
	if err != nil {
		return err
	}
	pool, forErr := nodepool.For(node, all)
	var members []*corev1.Node
	if pool != nil {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		members = poolctrl.Members(pool, nodes.Items, all)
	}
	pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return fmt.Errorf("listing the pods on node %s: %w", name, err)
	}
	onNode := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		onNode[i] = &pods.Items[i]
	}
	e := explainNode(node, pool, forErr, members, onNode, now)
	var consolidated *nodeConsolidation
	switch {
	case pool != nil && !pool.Spec.Provider.Manages():
		consolidated = &nodeConsolidation{Blocker: &consolidation.Blocker{Node: name, Reason: consolidation.BlockedDisabled,
			Message: fmt.Sprintf("pool %s has no provider sluice runs; sluice consolidates only pools whose machines it makes", pool.Name)}}
	case pool != nil:
		cl, err := readCluster(ctx, kc)
		if err != nil {
			return err
		}
		consolidated = consolidationOf(cl.plan(pool, all, now), name)
	}
	var capi *clusterAPIFacts
	if pool != nil {
		capi = clusterAPIOf(ctx, dyn, pool, node)
	}
	if format.structured() {
		return writeStructured(out, format, struct {
			disruption.Explanation
			Consolidation *nodeConsolidation `json:"consolidation,omitempty"`
			LastDrain     *lastDrain         `json:"lastDrain,omitempty"`
			ClusterAPI    *clusterAPIFacts   `json:"clusterAPI,omitempty"`
		}{e, consolidated, last, capi})
	}
	writeExplanation(out, e, consolidated, last, capi, now)
	return nil
}

// explainNode is what `sluice explain node` says of the node, from what
// was read of the cluster at one moment (the API, or a watch's cache as
// `sluice top` has it): its pool (forErr says why that pool, when several
// select it), the pool's members and the pods, of which those bound to the
// node count.
func explainNode(node *corev1.Node, pool *v1alpha1.NodePool, forErr error, members []*corev1.Node, pods []*corev1.Pod, now time.Time) disruption.Explanation {
	in := disruption.ExplainInput{Node: node, Now: now}
	if pool != nil {
		in.Pool, in.Members = pool, members
		in.ProviderReady = meta.FindStatusCondition(pool.Status.Conditions, poolctrl.ConditionProviderReady)
	}
	for _, p := range pods {
		if p.Spec.NodeName == node.Name {
			in.Pods = append(in.Pods, p)
		}
	}
	if event, phase, ok := mcontroller.PhaseOf(node); ok {
		in.Maintenance = &disruption.Maintenance{Event: event, Phase: string(phase)}
	}
	e := disruption.Explain(in)
	if forErr != nil {
		// Several pools select the node, or a pool's selector cannot be
		// read: the node follows the pool For chose, and the user should
		// know why.
		e.Notes = append(e.Notes, strings.Split(forErr.Error(), "\n")...)
	}
	return e
}

// nodeConsolidation is what a consolidation pass over the node's pool makes
// of the node.
type nodeConsolidation struct {
	// InPlan: the pass's command takes the node away.
	InPlan  bool                   `json:"inPlan"`
	Command string                 `json:"command,omitempty"`
	Blocker *consolidation.Blocker `json:"blocker,omitempty"`
}

func consolidationOf(p *consolidation.Plan, node string) *nodeConsolidation {
	out := &nodeConsolidation{}
	if c := p.Command; c != nil {
		out.Command = c.String()
		out.InPlan = slices.Contains(c.Nodes, node)
	}
	if b, ok := p.Blocker(node); ok {
		out.Blocker = &b
	}
	return out
}

// consolidationLine says what consolidation makes of the node.
func (c *nodeConsolidation) line(now time.Time) string {
	switch {
	case c.InPlan:
		return "in the plan: " + c.Command
	case c.Blocker != nil:
		msg := fmt.Sprintf("not consolidated (%s): %s", c.Blocker.Reason, c.Blocker.Message)
		if !c.Blocker.Until.IsZero() {
			msg += " (until " + timeAndDistance(c.Blocker.Until, now) + ")"
		}
		return msg
	case c.Command != "":
		return "a candidate; another consolidation goes first: " + c.Command
	}
	return "a candidate; nothing to gain now"
}

// writeExplanation prints the facts as kubectl describe does, then the
// verdict.
func writeExplanation(out io.Writer, e disruption.Explanation, c *nodeConsolidation, last *lastDrain, capi *clusterAPIFacts, now time.Time) {
	tw := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	row := func(key, format string, args ...any) { fmt.Fprintf(tw, "%s:\t%s\n", key, fmt.Sprintf(format, args...)) }
	more := func(format string, args ...any) { fmt.Fprintf(tw, "\t%s\n", fmt.Sprintf(format, args...)) }
	list := func(key string, items []string) {
		for i, it := range items {
			if i == 0 {
				row(key, "%s", it)
			} else {
				more("%s", it)
			}
		}
	}

	row("Node", "%s", e.Node)
	writeExplainPool(row, more, e.Pool)
	if capi != nil {
		list("Cluster API", capi.lines())
	}
	writeExplainState(row, e, now)
	if e.Pool != nil {
		if len(e.Differences) == 0 {
			row("Drift", "none")
		}
		diffs := make([]string, len(e.Differences))
		for i, d := range e.Differences {
			diffs[i] = d.String()
		}
		list("Drift", diffs)
		switch x := e.Expiry; {
		case x == nil:
			row("Expiry", "never")
		case x.Expired:
			row("Expiry", "expired at %s", timeAndDistance(x.At, now))
		default:
			row("Expiry", "at %s", timeAndDistance(x.At, now))
		}
	}
	if h := e.Health; h != nil {
		switch {
		case !h.Unhealthy:
			row("Health", "healthy (spec.repair)")
		case h.Halted != "":
			row("Health", "%s since %s; repairs halted: %s", h.Condition, timeAndDistance(*h.Since, now), h.Halted)
		default:
			row("Health", "%s since %s; repair due at %s, next step %s", h.Condition, timeAndDistance(*h.Since, now), timeAndDistance(*h.Due, now), h.NextStep)
		}
	}
	if r := e.Reboot; r != nil {
		row("Reboot", "required by its OS since %s", timeAndDistance(r.Since, now))
	}
	if p := e.Protection; p != nil {
		row("Protection", "%s", p.Message)
	} else if e.Pool != nil {
		row("Protection", "none")
	}
	if b := e.Budget; b != nil {
		writeExplainBudget(row, more, b, e.OlderCandidates, now)
	}
	if c != nil {
		row("Consolidate", "%s", c.line(now))
	}
	if last != nil {
		row("Last drain", "%s", last.line(e.Node, now))
	}
	list("Notes", e.Notes)
	_ = tw.Flush()
	fmt.Fprintf(out, "\nVerdict: %s\n", e.Verdict.Message)
}

// writeExplainPool prints the node's pool.
func writeExplainPool(row func(string, string, ...any), more func(string, ...any), p *disruption.PoolFacts) {
	if p == nil {
		row("Pool", "no pool: defaults only")
		return
	}
	managed := "managed: sluice creates and deletes its machines"
	if !p.Managed {
		managed = "not managed: sluice only reports the nodes it would replace"
	}
	row("Pool", "%s (provider %s, %s)", p.Name, p.Provider, managed)
	if c := p.ProviderReady; c != nil && p.Managed {
		more("ProviderReady %s (%s): %s", c.Status, c.Reason, c.Message)
	}
	more("%d nodes, %d out of service; paused: %s", p.Nodes, p.Disrupting, yesNo(p.Paused))
	if p.Problem != nil {
		more("cannot be applied (%s): %s", p.Problem.Reason, p.Problem.Message)
	}
}

// writeExplainState prints what is being done to the node now: its
// disruption record, maintenance, cordon, drain and deletion.
func writeExplainState(row func(string, string, ...any), e disruption.Explanation, now time.Time) {
	switch r := e.Record; {
	case e.RecordError != "":
		row("Disruption", "unreadable: %s", e.RecordError)
	case r == nil:
		row("Disruption", "none")
	default:
		s := fmt.Sprintf("%s, %s since %s", r.Reason, r.Phase, timeAndDistance(r.Since, now))
		if r.Replacement != "" {
			s += ", replacement " + r.Replacement
		}
		row("Disruption", "%s", s)
	}
	if m := e.Maintenance; m != nil {
		row("Maintenance", "event %s, phase %s", m.Event, m.Phase)
	} else {
		row("Maintenance", "none")
	}
	switch {
	case !e.Cordoned:
		row("Cordoned", "no")
	case e.CordonedBy == "":
		row("Cordoned", "yes, outside sluice (no %s)", contract.AnnotationCordonedBy)
	default:
		row("Cordoned", "yes, by %s", e.CordonedBy)
	}
	if c := e.DrainClaim; c != nil {
		holder := c.Holder
		if holder == "" {
			holder = "an unnamed drain"
		}
		row("Drain", "held by %s until %s unless renewed", holder, timeAndDistance(c.Until, now))
	}
	if e.Deleting {
		row("Deleting", "yes")
	}
	if e.OutOfService != "" {
		row("Out of service", "%s (counts against the pool's budgets)", e.OutOfService)
	}
}

func writeExplainBudget(row func(string, string, ...any), more func(string, ...any), b *disruption.BudgetFacts, older int, now time.Time) {
	if b.Error != "" {
		row("Budget", "%s: cannot be read, so nothing is allowed: %s", b.Reason, b.Error)
		return
	}
	binding := "no budget applies"
	if b.Binding != "" {
		binding = "budget " + b.Binding
	}
	row("Budget", "%s: %d of %d allowed now (%s; %d out of service)", b.Reason, b.Allowed, b.Limit, binding, b.Disrupting)
	switch {
	case older == 1:
		more("1 candidate ahead of it comes first (an earlier method's, or older)")
	case older > 1:
		more("%d candidates ahead of it come first (an earlier method's, or older)", older)
	}
	if c := b.NextChange; c != nil {
		what := "the budgets change"
		if c.Budget != "" {
			what = "the window of " + c.Budget + " " + opensOrCloses(c.Opens)
		}
		more("%s at %s (then %d allowed)", what, timeAndDistance(c.At, now), c.Allowed)
	}
}
