package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/top"
)

func newTopCommand() *cobra.Command {
	client := kube.ClientFlags{RequestTimeout: kube.DefaultRequestTimeout}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live full-screen view of the NodePools: nodes by state, drains, budgets, maintenance deadlines",
		Long: `Top watches the cluster's nodes, NodePools, pods and sluice's Events (informers: one list and one
watch each, no polling) and shows, per pool, its nodes by state (serving, cordoned and by whom,
draining with progress, blocked and by what, replacing, booting, not ready; drifted, expired,
expiring soon), what its budgets allow per reason and how many nodes each reason uses, the next
budget window, maintenance events counting down to their deadline, and sluice's last Events.
Enter on a node shows what ` + "`sluice explain node`" + ` says of it and its drain as it happens.

Keys, as k9s: j/k or arrows move, enter explains a node, / filters, esc goes back, ? helps, q quits.

It needs a terminal: for a line per change in a script, a log or a pipe, use ` + "`sluice status -w`" + `.
NO_COLOR (any value) turns colour off. A lost connection is said on a banner and every row is
marked stale (~) until the watches are back; what RBAC hides (pods, Events) is named.

Exit status: 0 when quit, 1 an error (such as stdout not being a terminal).`,
		Example: `  sluice top
  NO_COLOR=1 sluice top --kubeconfig ~/.kube/prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The connection first, as every command: a bad kubeconfig is
			// named whether or not stdout is a terminal.
			link := top.NewLink(clock.RealClock{})
			kc, dyn, cfg, err := watchClients(cmd.Context(), client, link)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !isTerminal(out) {
				return errNotATerminal
			}
			return runTop(cmd.Context(), cmd.InOrStdin(), out, kc, dyn, link, cfg.Host, clock.RealClock{})
		},
	}
	client.AddFlags(cmd.Flags())
	return cmd
}

// runTop runs the full screen until q (or ctx ends).
func runTop(ctx context.Context, in io.Reader, out io.Writer, kc kubernetes.Interface, dyn dynamic.Interface, link *top.Link, title string, clk clock.PassiveClock) error {
	// The client's own log lines (a reflector's failed watch) would tear
	// the screen; the banner says what they would.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := top.NewWatch(kc, dyn, clk, top.Watched{Pods: true, Events: true}, link)
	w.Start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
	err := w.WaitForSync(syncCtx)
	syncCancel()
	if err != nil {
		return err
	}
	renderer := lipgloss.NewRenderer(out)
	color := os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	if !color {
		renderer.SetColorProfile(termenv.Ascii)
	}
	app := top.NewApp(w, explainFromSnapshot, title, top.NewStyles(renderer, color))
	p := tea.NewProgram(app, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	_, err = p.Run()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// explainFromSnapshot is what `sluice explain node` prints of the node,
// from top's cache (no consolidation pass: that reads the cluster, which
// `sluice explain node` does).
func explainFromSnapshot(s top.Snapshot, name string) string {
	for i := range s.Nodes {
		node := &s.Nodes[i]
		if node.Name != name {
			continue
		}
		pool, forErr := nodepool.For(node, s.Pools)
		var members []*corev1.Node
		if pool != nil {
			members = poolctrl.Members(pool, s.Nodes, s.Pools)
		}
		var b bytes.Buffer
		writeExplanation(&b, explainNode(node, pool, forErr, members, s.Pods, s.Now), nil, nil, nil, s.Now)
		return b.String()
	}
	return fmt.Sprintf("node %s is gone", name)
}

// watchClients are the clients of a command that watches: the first
// contact bounded as any command's, the watches unbounded (a bound would
// cut each watch, and the view would flap between lost and live), and
// every request reported to link.
func watchClients(ctx context.Context, flags kube.ClientFlags, link *top.Link) (kubernetes.Interface, dynamic.Interface, *rest.Config, error) {
	_, cfg, err := flags.Client(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	cfg.Wrap(link.Wrap)
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("building a client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("building a client: %w", err)
	}
	return kc, dyn, cfg, nil
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}
