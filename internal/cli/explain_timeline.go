package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/timeline"
)

// errNodeNotFound is wrapped in what runExplain returns for a node that does
// not exist.
var errNodeNotFound = errors.New("not found")

// loadKept reads the node's last drain as the controller keeps it in
// namespace; nil and the reason when none can be read.
func loadKept(ctx context.Context, kc kubernetes.Interface, namespace, node string) (*timeline.Kept, error) {
	if namespace == "" {
		return nil, fmt.Errorf("%w: --controller-namespace is empty", timeline.ErrNotFound)
	}
	return timeline.Load(ctx, kc, namespace, node)
}

// explainTimeline writes the node's kept drain (or says why there is none,
// loadErr) to path. gone says the node no longer exists: the explanation
// could not be given, and the timeline is what is left of it.
func explainTimeline(errOut io.Writer, kept *timeline.Kept, loadErr error, namespace, node, path string, gone bool) error {
	switch {
	case errors.Is(loadErr, timeline.ErrNotFound) && gone:
		return fmt.Errorf("node %s not found, and the controller keeps no drain of it in namespace %s (--controller-namespace): list the nodes with `kubectl get nodes`", node, namespace)
	case errors.Is(loadErr, timeline.ErrNotFound):
		return fmt.Errorf("--timeline: %w; the controller keeps each node's last drain for --timeline-retention (24h) in its namespace (--controller-namespace %s). A drain by `sluice drain` draws its own with `sluice drain --timeline`", loadErr, namespace)
	case loadErr != nil:
		return fmt.Errorf("--timeline: %w", loadErr)
	}
	if err := timeline.WriteFile(path, kept.Timeline); err != nil {
		return fmt.Errorf("--timeline: %w", err)
	}
	when := "at an unknown time"
	if !kept.Ended.IsZero() {
		when = "at " + kept.Ended.UTC().Format(time.RFC3339)
	}
	if gone {
		fmt.Fprintf(errOut, "node %s no longer exists; ", node)
	}
	fmt.Fprintf(errOut, "timeline: %s (the %s drain of %s that ended %s)\n", path, kept.Reason, node, when)
	return nil
}

// lastDrain sums up the node's last drain by the controller, as kept for
// --timeline.
type lastDrain struct {
	Reason  string    `json:"reason"`
	Outcome string    `json:"outcome"`
	Pods    int       `json:"pods"`
	Ended   time.Time `json:"ended"`
}

// lastDrainOf sums up a kept drain; nil for none (none kept, or it could not
// be read: explain needs no access to the controller's namespace).
func lastDrainOf(kept *timeline.Kept, node string) *lastDrain {
	if kept == nil {
		return nil
	}
	last := &lastDrain{Reason: kept.Reason, Ended: kept.Ended}
	for _, l := range kept.Timeline.Lanes {
		if l.Node == node {
			last.Outcome, last.Pods = l.Outcome, len(l.Pods)
		}
	}
	return last
}

func (l *lastDrain) line(node string, now time.Time) string {
	outcome := l.Outcome
	if outcome == "" {
		outcome = "stopped before its end"
	}
	msg := fmt.Sprintf("%s, %s (%d pods)", l.Reason, outcome, l.Pods)
	if !l.Ended.IsZero() {
		msg += ", ended " + timeAndDistance(l.Ended, now)
	}
	return msg + "; draw it: sluice explain node " + node + " --timeline FILE.html"
}
