package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/registry"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// upgradeFlags are `sluice upgrade pool`'s settings; unset ones keep the
// pool's spec.upgrade (or its defaults).
type upgradeFlags struct {
	image, maxSurge, maxUnavailable, behavior string
	drainTimeout, soak                        time.Duration
	maxBlocked                                int32
	dryRun                                    bool
}

func newUpgradeCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Roll a NodePool to a new node image: surge nodes first, drain with a timeout, soak",
		Long: `An upgrade replaces each node of a pool with one made from the new image, the way an AKS node pool
upgrade does: up to maxSurge new nodes are made first, the old nodes they replace are drained within
drainTimeout, soaked for nodeSoakDuration, and deleted; nodes that will not drain are put back
(undrainableNodeBehavior Schedule) or quarantined (Cordon). The pool's budgets for reason Upgrade
cap every batch. The controller does the work; these commands start, steer and watch it.

Forecast one first: sluice plan upgrade POOL --image IMAGE.`,
		Example: `  sluice plan upgrade batch --image AKSUbuntu-2204gen2containerd-202612.01.0
  sluice upgrade pool batch --image AKSUbuntu-2204gen2containerd-202612.01.0 --max-surge 33%
  sluice upgrade status batch -w
  sluice upgrade pause batch; sluice upgrade resume batch; sluice upgrade abort batch`,
	}
	cmd.AddCommand(newUpgradePoolCommand(&client), newUpgradeControlCommand(&client, "pause"), newUpgradeControlCommand(&client, "resume"),
		newUpgradeControlCommand(&client, "abort"), newUpgradeStatusCommand(&client))
	client.AddFlags(cmd.PersistentFlags())
	return cmd
}

func newUpgradePoolCommand(client *kube.ClientFlags) *cobra.Command {
	var f upgradeFlags
	cmd := &cobra.Command{
		Use:   "pool POOL --image IMAGE",
		Short: "Start upgrading a pool to an image",
		Long: `Sets the pool's spec.template.image (and the spec.upgrade settings given as flags); the controller
then rolls the pool. Refused, with nothing changed: an image the pool's provider does not have, a pool
whose provider sluice does not run, maxSurge and maxUnavailable that come to 0 nodes, and a pool
already upgrading. Run again on a Failed or Aborted upgrade to the same image, it tries the nodes
that were Blocked or Quarantined again.

Exit status: 0 started, 1 refused or an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.image == "" {
				return errors.New("--image is required: the node image to upgrade to, such as AKSUbuntu-2204gen2containerd-202612.01.0")
			}
			if cmd.Flags().Changed("max-blocked-nodes") && f.maxBlocked < 0 {
				return fmt.Errorf("--max-blocked-nodes %d: must be 0 or more", f.maxBlocked)
			}
			// Every flag is checked before the cluster is called.
			if err := f.apply(&v1alpha1.UpgradeSpec{}, cmd.Flags().Changed); err != nil {
				return err
			}
			kc, dyn, err := poolClients(cmd.Context(), *client)
			if err != nil {
				return err
			}
			return runUpgradePool(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[0], f, cmd.Flags().Changed)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", "", "the node image to upgrade to")
	fl.StringVar(&f.maxSurge, "max-surge", "", "new nodes made ahead of the nodes they replace: N or N% (default the pool's, or 10%)")
	fl.StringVar(&f.maxUnavailable, "max-unavailable", "", "nodes drained before their replacement is Ready: N or N% (default the pool's, or 0)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 0, "how long one node may take to drain (default the pool's, or 30m)")
	fl.DurationVar(&f.soak, "node-soak-duration", 0, "how long a drained node waits before it is deleted (default the pool's, or 0s)")
	fl.StringVar(&f.behavior, "undrainable-node-behavior", "", "Schedule (put a node that will not drain back) or Cordon (quarantine it)")
	fl.Int32Var(&f.maxBlocked, "max-blocked-nodes", 0, "with Cordon, how many nodes may be quarantined before the upgrade fails (default the surge count)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "check and print what would change, change nothing")
	return cmd
}

// getPool reads one NodePool with the cluster's node list and the pool's
// members.
func getPool(ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, name string) (*v1alpha1.NodePool, []*corev1.Node, error) {
	all, chosen, err := namedPools(ctx, dyn, []string{name})
	if err != nil {
		return nil, nil, err
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	return chosen[0], poolctrl.Members(chosen[0], nodes.Items, all), nil
}

// checkImage asks the pool's provider whether it can make machines of the
// image: a provider that cannot choose an image (or a pool with none) is
// refused with its reason, not rolled for nothing.
func checkImage(pool *v1alpha1.NodePool, image string) error {
	name := pool.Spec.Provider.Name
	images := registry.Images(name)
	if !images.Sets() {
		return fmt.Errorf("node pool %s has provider %s, which cannot set a machine's image (%s); sluice will not replace its nodes for an image (it reports them: sluice status %s)",
			pool.Name, pool.Spec.Provider.NameOrNone(), images.Unsupported, pool.Name)
	}
	if images.Check != nil {
		return images.Check(image)
	}
	return nil
}

// upgradeInFlight says why a new upgrade may not start now, "" when it may.
func upgradeInFlight(pool *v1alpha1.NodePool, image string) string {
	st := pool.Status.Upgrade
	if st == nil {
		return ""
	}
	switch st.Phase {
	case v1alpha1.UpgradeProgressing, v1alpha1.UpgradePaused:
		if st.Image == image {
			return fmt.Sprintf("node pool %s is already upgrading to %s (%s, %d of %d nodes): follow it with `sluice upgrade status %s -w`", pool.Name, image, st.Phase, st.Upgraded, st.Nodes, pool.Name)
		}
		return fmt.Sprintf("node pool %s is upgrading to %s (%s, %d of %d nodes): abort it first (`sluice upgrade abort %s`) or let it finish", pool.Name, st.Image, st.Phase, st.Upgraded, st.Nodes, pool.Name)
	}
	return ""
}

func runUpgradePool(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, name string, f upgradeFlags, changed func(string) bool) error {
	pool, members, err := getPool(ctx, kc, dyn, name)
	if err != nil {
		return err
	}
	if err := checkImage(pool, f.image); err != nil {
		return err
	}
	if why := upgradeInFlight(pool, f.image); why != "" {
		return errors.New(why)
	}
	next := pool.DeepCopy()
	if next.Spec.Upgrade == nil {
		next.Spec.Upgrade = &v1alpha1.UpgradeSpec{}
	}
	if err := f.apply(next.Spec.Upgrade, changed); err != nil {
		return err
	}
	if next.Spec.Template == nil {
		next.Spec.Template = &v1alpha1.NodeTemplate{}
	}
	next.Spec.Template.Image = f.image
	v := disruption.Observe(next, members, clock.RealClock{}.Now())
	if err := pools.UpgradeError(next, v.Size); err != nil {
		return fmt.Errorf("node pool %s: %w", name, err)
	}
	retry := retriedNodes(members, f.image)
	old := 0
	for _, n := range members {
		if n.Annotations[contract.AnnotationImage] != f.image {
			old++
		}
	}
	surge, unavailable, _ := v.UpgradeWidth()
	verb := "upgrading"
	if f.dryRun {
		verb = "would upgrade (dry run)"
	}
	fmt.Fprintf(out, "nodepool/%s %s %d of %d nodes to %s: maxSurge %d, maxUnavailable %d, drainTimeout %s, nodeSoakDuration %s, undrainableNodeBehavior %s\n",
		name, verb, old, len(members), f.image, surge, unavailable, next.Spec.Upgrade.DrainTimeoutOrDefault(), next.Spec.Upgrade.SoakOrDefault(), next.Spec.Upgrade.Behavior())
	if len(retry) > 0 {
		fmt.Fprintf(out, "nodes blocked by the last attempt are tried again: %s\n", strings.Join(retry, ", "))
	}
	// The forecast first, with the settings as they will be.
	fc, err := forecast(ctx, kc, next, members, f.image, clock.RealClock{}.Now())
	if err != nil {
		return err
	}
	writeForecast(out, fc)
	if f.dryRun {
		return nil
	}
	for _, n := range members {
		if slices.Contains(retry, n.Name) {
			if err := clearBlocked(ctx, kc, n); err != nil {
				return err
			}
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pool.ResourceVersion, "annotations": map[string]any{contract.AnnotationUpgrade: nil}},
		"spec":     map[string]any{"template": map[string]any{"image": f.image}, "upgrade": next.Spec.Upgrade},
	})
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sluice"}); err != nil {
		return fmt.Errorf("updating node pool %s: %w", name, err)
	}
	fmt.Fprintf(out, "follow it: sluice upgrade status %s -w\n", name)
	return nil
}

// apply sets the flags given on u.
func (f upgradeFlags) apply(u *v1alpha1.UpgradeSpec, changed func(string) bool) error {
	if changed("max-surge") {
		v := intstr.Parse(f.maxSurge)
		if _, err := (&v1alpha1.UpgradeSpec{MaxSurge: &v}).Surge(1); err != nil {
			return fmt.Errorf("--max-surge %w", err)
		}
		u.MaxSurge = &v
	}
	if changed("max-unavailable") {
		v := intstr.Parse(f.maxUnavailable)
		if _, err := (&v1alpha1.UpgradeSpec{MaxUnavailable: &v}).Unavailable(1); err != nil {
			return fmt.Errorf("--max-unavailable %w", err)
		}
		u.MaxUnavailable = &v
	}
	if changed("drain-timeout") {
		if f.drainTimeout < 10*time.Second {
			return fmt.Errorf("--drain-timeout %s: must be at least 10s", f.drainTimeout)
		}
		u.DrainTimeout = &metav1.Duration{Duration: f.drainTimeout}
	}
	if changed("node-soak-duration") {
		if f.soak < 0 || f.soak > 30*time.Minute {
			return fmt.Errorf("--node-soak-duration %s: must be from 0s to 30m", f.soak)
		}
		u.NodeSoakDuration = &metav1.Duration{Duration: f.soak}
	}
	if changed("undrainable-node-behavior") {
		b := v1alpha1.UndrainableNodeBehavior(f.behavior)
		if b != v1alpha1.UndrainableSchedule && b != v1alpha1.UndrainableCordon {
			return fmt.Errorf("--undrainable-node-behavior %q: use Schedule or Cordon", f.behavior)
		}
		u.UndrainableNodeBehavior = b
	}
	if changed("max-blocked-nodes") {
		u.MaxBlockedNodes = &f.maxBlocked
	}
	return nil
}

// retriedNodes are the nodes an earlier upgrade to image gave up on.
func retriedNodes(members []*corev1.Node, image string) []string {
	var out []string
	for _, n := range members {
		if poolctrl.BlockedFor(n, image) {
			out = append(out, n.Name)
		}
	}
	return out
}

// clearBlocked takes an earlier upgrade's give-up mark off a node
// (poolctrl.Unblock), so the upgrade tries it again.
func clearBlocked(ctx context.Context, kc kubernetes.Interface, n *corev1.Node) error {
	raw, err := poolctrl.Unblock(n)
	if err != nil {
		return err
	}
	if _, err := kc.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: "sluice"}); err != nil {
		return fmt.Errorf("clearing the upgrade mark of node %s: %w", n.Name, err)
	}
	return nil
}

func newUpgradeControlCommand(client *kube.ClientFlags, verb string) *cobra.Command {
	short := map[string]string{
		"pause":  "Pause a pool's upgrade: nodes in flight finish, no new one starts",
		"resume": "Resume a paused or aborted upgrade",
		"abort":  "Abort a pool's upgrade: no new surge, nodes in flight rolled back (a drained node finishes), the pool left consistent",
	}[verb]
	return &cobra.Command{
		Use:   verb + " POOL",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, dyn, err := poolClients(cmd.Context(), *client)
			if err != nil {
				return err
			}
			return runUpgradeControl(cmd.Context(), cmd.OutOrStdout(), kc, dyn, args[0], verb)
		},
	}
}

func runUpgradeControl(ctx context.Context, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, name, verb string) error {
	pool, _, err := getPool(ctx, kc, dyn, name)
	if err != nil {
		return err
	}
	st := pool.Status.Upgrade
	phase := v1alpha1.UpgradePhase("none")
	if st != nil {
		phase = st.Phase
	}
	var value any
	switch verb {
	case "pause":
		if phase != v1alpha1.UpgradeProgressing {
			return fmt.Errorf("node pool %s has no upgrade in progress to pause (upgrade: %s)", name, phase)
		}
		value = v1alpha1.UpgradeControlPaused
	case "abort":
		if phase != v1alpha1.UpgradeProgressing && phase != v1alpha1.UpgradePaused {
			return fmt.Errorf("node pool %s has no upgrade in progress to abort (upgrade: %s)", name, phase)
		}
		value = v1alpha1.UpgradeControlAborted
	case "resume":
		if phase != v1alpha1.UpgradePaused && phase != v1alpha1.UpgradeAborted {
			return fmt.Errorf("node pool %s has no paused or aborted upgrade to resume (upgrade: %s)", name, phase)
		}
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.AnnotationUpgrade: value}}})
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sluice"}); err != nil {
		return fmt.Errorf("updating node pool %s: %w", name, err)
	}
	fmt.Fprintf(out, "nodepool/%s upgrade to %s: %s requested\n", name, st.Image, verb)
	return nil
}

func newUpgradeStatusCommand(client *kube.ClientFlags) *cobra.Command {
	var (
		watch  bool
		output string
		every  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status POOL",
		Short: "Show a pool's upgrade: phase, nodes upgraded, the step, the ETA, blocked nodes",
		Long: `Prints the pool's status.upgrade as the controller last wrote it. With -w it prints a line each time
the upgrade moves, and exits once it has Succeeded, Failed or been Aborted (exit status 1 for
Failed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			if every <= 0 {
				return fmt.Errorf("--interval %s: must be positive", every)
			}
			_, dyn, err := poolClients(cmd.Context(), *client)
			if err != nil {
				return err
			}
			return runUpgradeStatus(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), dyn, args[0], format, watch, every, clock.RealClock{})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the upgrade until it ends")
	cmd.Flags().DurationVar(&every, "interval", 2*time.Second, "with -w, how often to look")
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}

func runUpgradeStatus(ctx context.Context, out, errOut io.Writer, dyn dynamic.Interface, name string, format outputFormat, watch bool, every time.Duration, clk clock.Clock) error {
	last := ""
	contact := &followContact{out: errOut, clk: clk, every: every}
	for {
		pool, err := getOnePool(ctx, dyn, name)
		if err != nil {
			if !watch || last == "" || ctx.Err() != nil || apierrors.IsNotFound(err) {
				// The first contact is bounded by --request-timeout; so is
				// each later one, and a pool deleted meanwhile ends the watch.
				return err
			}
			contact.lost(err)
		} else {
			contact.back()
		}
		if err == nil {
			var done bool
			if last, done, err = printUpgradeStep(out, pool, format, watch, clk.Now(), last); done || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(every):
		}
	}
}

// printUpgradeStep prints one look at the pool's upgrade and says whether
// the command is done: not watching, or the upgrade ended (an error when it
// failed).
func printUpgradeStep(out io.Writer, pool *v1alpha1.NodePool, format outputFormat, watch bool, now time.Time, last string) (string, bool, error) {
	st := pool.Status.Upgrade
	last, err := printUpgrade(out, pool, format, watch, now, last)
	if err != nil {
		return last, true, err
	}
	// Watching, a status about another image than the template's is
	// the last upgrade's: the controller has not seen this one yet.
	current := st != nil && pool.Spec.Template != nil && st.Image == pool.Spec.Template.Image
	ended := current && (st.Phase == v1alpha1.UpgradeSucceeded || st.Phase == v1alpha1.UpgradeFailed || st.Phase == v1alpha1.UpgradeAborted)
	if watch && ended && st.Phase == v1alpha1.UpgradeFailed {
		return last, true, fmt.Errorf("the upgrade of node pool %s failed: %s", pool.Name, st.Message)
	}
	return last, !watch || ended, nil
}

// followContact says, while following, when the API server is lost (once,
// not at every retry) and when it is back.
type followContact struct {
	out    io.Writer
	clk    clock.Clock
	every  time.Duration
	losing error
}

func (c *followContact) lost(err error) {
	if c.losing == nil {
		fmt.Fprintf(c.out, "%s  lost contact with the API server, retrying every %s: %v\n", c.clk.Now().Format("15:04:05"), c.every, err)
	}
	c.losing = err
}

func (c *followContact) back() {
	if c.losing != nil {
		fmt.Fprintf(c.out, "%s  reconnected\n", c.clk.Now().Format("15:04:05"))
		c.losing = nil
	}
}

// printUpgrade prints the pool's upgrade status: once, or, watching, when it
// differs from last (what was printed before), which it returns.
func printUpgrade(out io.Writer, pool *v1alpha1.NodePool, format outputFormat, watch bool, now time.Time, last string) (string, error) {
	switch {
	case format.structured():
		// Watching, one document per change: a JSON line each, or YAML
		// documents one after the other.
		line, err := json.Marshal(pool.Status.Upgrade)
		if err != nil {
			return last, err
		}
		if string(line) == last {
			return last, nil
		}
		return string(line), writeStatusDocument(out, format, line)
	case !watch:
		writeUpgrade(out, pool, now)
	default:
		line := upgradeLine(pool)
		if line != last {
			fmt.Fprintf(out, "%s  %s\n", now.Format("15:04:05"), line)
		}
		return line, nil
	}
	return last, nil
}

func getOnePool(ctx context.Context, dyn dynamic.Interface, name string) (*v1alpha1.NodePool, error) {
	u, err := dyn.Resource(v1alpha1.NodePoolResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node pool %s: %w", name, err)
	}
	var pool v1alpha1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
		return nil, fmt.Errorf("decoding node pool %s: %w", name, err)
	}
	return &pool, nil
}

// upgradeLine is one line of `upgrade status -w`.
func upgradeLine(pool *v1alpha1.NodePool) string {
	st := pool.Status.Upgrade
	if st == nil {
		return "no upgrade: every node is on the template's image"
	}
	s := fmt.Sprintf("%-11s %d/%d upgraded  in flight %d  batch %d/%d", st.Phase, st.Upgraded, st.Nodes, st.InFlight, st.Batch, st.Batches)
	if st.Step != "" {
		s += "  " + st.Step
	}
	if n := len(st.Blocked) + len(st.Quarantined); n > 0 {
		s += fmt.Sprintf("  blocked %d", n)
	}
	if st.ETA != nil {
		s += "  eta " + st.ETA.Format("15:04:05")
	}
	return s
}

func writeUpgrade(out io.Writer, pool *v1alpha1.NodePool, now time.Time) {
	st := pool.Status.Upgrade
	if st == nil {
		fmt.Fprintf(out, "nodepool/%s: no upgrade (every node is on the template's image, or spec.upgrade is unset)\n", pool.Name)
		return
	}
	fmt.Fprintf(out, "nodepool/%s  upgrade to %s  %s\n", pool.Name, st.Image, st.Phase)
	fmt.Fprintf(out, "  Nodes:        %d of %d upgraded, %d in flight (batch %d of %d)\n", st.Upgraded, st.Nodes, st.InFlight, st.Batch, st.Batches)
	if st.Step != "" {
		fmt.Fprintf(out, "  Step:         %s\n", st.Step)
	}
	if st.StartedAt != nil {
		fmt.Fprintf(out, "  Started:      %s\n", timeAndDistance(st.StartedAt.Time, now))
	}
	if st.CompletedAt != nil {
		fmt.Fprintf(out, "  Completed:    %s (took %s)\n", timeAndDistance(st.CompletedAt.Time, now), st.CompletedAt.Sub(st.StartedAt.Time).Round(time.Second))
	}
	if st.ETA != nil {
		fmt.Fprintf(out, "  ETA:          %s (in %s)\n", st.ETA.UTC().Format(time.RFC3339), st.ETA.Sub(now).Round(time.Second))
	}
	if len(st.Blocked) > 0 {
		fmt.Fprintf(out, "  Blocked:      %s (put back on the old image: undrainableNodeBehavior Schedule)\n", strings.Join(st.Blocked, ", "))
	}
	if len(st.Quarantined) > 0 {
		fmt.Fprintf(out, "  Quarantined:  %s (left cordoned, %s=%s)\n", strings.Join(st.Quarantined, ", "), contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusQuarantined)
	}
	if st.Message != "" {
		fmt.Fprintf(out, "  Message:      %s\n", st.Message)
	}
}

func writeStatusDocument(out io.Writer, format outputFormat, line []byte) error {
	if format == outputJSON {
		_, err := fmt.Fprintln(out, string(line))
		return err
	}
	doc, err := yaml.JSONToYAML(line)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "---\n%s", doc)
	return err
}
