package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// progressPrinter shows a drain as it runs: on a terminal, a block of one
// line per node redrawn in place; otherwise one plain line per step.
type progressPrinter struct {
	out   io.Writer
	clock clock.WithTicker
	tty   bool

	mu    sync.Mutex
	order []string
	nodes map[string]*nodeProgress
	drawn int
}

type nodeProgress struct {
	total, gone, asked int
	blocked            map[string]string // pod -> reason and message
	outcome            string
}

func newProgressPrinter(out io.Writer, clk clock.WithTicker) *progressPrinter {
	tty := false
	if f, ok := out.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
	}
	return &progressPrinter{out: out, clock: clk, tty: tty, nodes: map[string]*nodeProgress{}}
}

// start begins redrawing (on a terminal) and returns the function that stops it.
func (p *progressPrinter) start() func() {
	if !p.tty {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := p.clock.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				p.redraw()
				return
			case <-ticker.C():
				p.redraw()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Observe records a step; it never blocks on the terminal.
func (p *progressPrinter) Observe(ev drain.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nodes[ev.Node]
	if !ok {
		n = &nodeProgress{blocked: map[string]string{}}
		p.nodes[ev.Node] = n
		p.order = append(p.order, ev.Node)
	}
	var line string
	switch ev.Kind {
	case drain.ProgressNodeStarted:
		n.total = ev.Pods
		line = fmt.Sprintf("node/%s: %d pods to move", ev.Node, ev.Pods)
	case drain.ProgressCordoned:
		line = fmt.Sprintf("node/%s cordoned", ev.Node)
	case drain.ProgressEvicting:
		n.asked++
		delete(n.blocked, ev.Pod)
		line = fmt.Sprintf("pod/%s evicted (%s)", ev.Pod, ev.Message)
	case drain.ProgressForced:
		n.asked++
		delete(n.blocked, ev.Pod)
		line = fmt.Sprintf("pod/%s %s: %s", ev.Pod, ev.Reason, ev.Message)
	case drain.ProgressBlocked:
		n.blocked[ev.Pod] = fmt.Sprintf("%s: %s", ev.Reason, ev.Message)
		line = fmt.Sprintf("pod/%s blocked: %s: %s", ev.Pod, ev.Reason, ev.Message)
	case drain.ProgressGone:
		n.gone++
		delete(n.blocked, ev.Pod)
		line = fmt.Sprintf("pod/%s gone", ev.Pod)
	case drain.ProgressNodeFinished:
		n.outcome = ev.Message
		line = fmt.Sprintf("node/%s %s", ev.Node, strings.ToLower(ev.Message))
	}
	if !p.tty && line != "" {
		fmt.Fprintf(p.out, "%s %s\n", ev.Time.Format("15:04:05"), line)
	}
}

func (p *progressPrinter) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the top of the block
	}
	lines := 0
	for _, name := range p.order {
		n := p.nodes[name]
		state := n.outcome
		if state == "" {
			state = "draining"
		}
		fmt.Fprintf(&b, "\x1b[2Knode/%s  %s  %d/%d gone, %d terminating, %d blocked\n", name, state, n.gone, n.total, max(n.asked-n.gone, 0), len(n.blocked))
		lines++
		pods := make([]string, 0, len(n.blocked))
		for pod := range n.blocked {
			pods = append(pods, pod)
		}
		sort.Strings(pods)
		for i, pod := range pods {
			if i == 3 {
				fmt.Fprintf(&b, "\x1b[2K    … and %d more blocked\n", len(pods)-3)
				lines++
				break
			}
			fmt.Fprintf(&b, "\x1b[2K    %s waits: %s\n", pod, truncate(n.blocked[pod], 140))
			lines++
		}
	}
	for i := lines; i < p.drawn; i++ {
		b.WriteString("\x1b[2K\n") // clear lines left from a taller frame
	}
	p.drawn = max(lines, p.drawn)
	_, _ = io.WriteString(p.out, b.String())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// writeReport prints the report for people: one line per node, then every pod
// that did not simply leave, with its reason and what to do.
// writeReport prints a table of nodes, then one of the pods worth a look
// (blocked, skipped for a reason, or with a warning); wide lists every pod,
// with its grace period and how long it took to go.
func writeReport(out io.Writer, r *drain.Report, wide bool) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOUTCOME\tEVICTED\tSECONDS\tMESSAGE")
	var notable []string
	for _, n := range r.Nodes {
		moved := 0
		for _, p := range n.Pods {
			switch p.Outcome {
			case drain.PodEvicted, drain.PodDeleted, drain.PodWouldEvict:
				moved++
			}
			if wide || p.Reason != "" || p.Outcome == drain.PodBlocked || p.Outcome == drain.PodWouldBlock || p.Outcome == drain.PodWouldWait {
				notable = append(notable, podLine(n.Name, p, wide))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.1f\t%s\n", n.Name, n.Outcome, moved, len(n.Pods), n.Seconds, n.Message)
	}
	_ = tw.Flush()
	if len(notable) == 0 {
		return
	}
	fmt.Fprintln(out)
	if wide {
		fmt.Fprintln(tw, "POD\tNODE\tOUTCOME\tREASON\tPDB\tGRACE\tGONE-AFTER\tMESSAGE")
	} else {
		fmt.Fprintln(tw, "POD\tNODE\tOUTCOME\tREASON\tPDB\tMESSAGE")
	}
	for _, line := range notable {
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

func podLine(node string, p drain.PodReport, wide bool) string {
	pdb := dash(p.PDB)
	if !wide {
		return fmt.Sprintf("%s/%s\t%s\t%s\t%s\t%s\t%s", p.Namespace, p.Name, node, p.Outcome, p.Reason, pdb, p.Message)
	}
	grace, gone := "-", "-"
	if p.GracePeriodSeconds != nil {
		grace = fmt.Sprintf("%ds", *p.GracePeriodSeconds)
	}
	if p.GoneAfterSeconds != nil {
		gone = fmt.Sprintf("%.1fs", *p.GoneAfterSeconds)
	}
	return fmt.Sprintf("%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.Namespace, p.Name, node, p.Outcome, dash(string(p.Reason)), pdb, grace, gone, p.Message)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
