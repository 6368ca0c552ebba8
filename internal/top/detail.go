package top

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/ownership"
)

// maxNodeEvents is how many of a node's Events its detail shows.
const maxNodeEvents = 8

// DrainLines say what a drain is doing to the node as it happens: the
// pods still on it, each leaving, refused and why, or waiting its turn;
// the drain's deadline; and the last Events of the node and its pods.
func DrainLines(s Snapshot, name string) []string {
	var node *corev1.Node
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			node = &s.Nodes[i]
		}
	}
	if node == nil {
		return []string{"node " + name + " is gone (deleted since it was selected)"}
	}
	in := indexOf(s)
	_, _, live := ownership.LiveClaim(node, s.Now)
	out := []string{claimLine(node, s.Now)}
	out = append(out, podLines(node, in, live)...)
	return append(out, nodeEvents(s.Events, name)...)
}

// claimLine says who holds the node's drain, and its deadline.
func claimLine(node *corev1.Node, now time.Time) string {
	holder, lapses, live := ownership.LiveClaim(node, now)
	if !live {
		return "Drain: none now"
	}
	if holder == "" {
		holder = "an unnamed drain"
	}
	line := fmt.Sprintf("Drain: held by %s (claim renewed until %s)", holder, lapses.Local().Format(time.TimeOnly))
	if c, ok := ownership.ClaimOf(node); ok && c.Deadline != nil {
		line += fmt.Sprintf("; deadline %s (%s)", c.Deadline.Local().Format(time.TimeOnly), until(*c.Deadline, now))
	}
	return line
}

// podLines are the pods a drain moves that are still on the node.
func podLines(node *corev1.Node, in index, live bool) []string {
	if in.pods == nil {
		return []string{"Pods: cannot be seen (RBAC): what is left on the node is unknown"}
	}
	var out []string
	left, total := progress(node, in)
	if total > 0 && live {
		out = append(out, fmt.Sprintf("Pods: %d of %d left %s", left, total, bar(total-left, total, 20)))
	} else {
		out = append(out, fmt.Sprintf("Pods: %d that a drain moves", left))
	}
	blocked := map[string]string{}
	for _, b := range blocks(node, in) {
		blocked[b.Pod] = b.Message
	}
	pods := slices.Clone(in.pods[node.Name])
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		switch msg, refused := blocked[key]; {
		case p.DeletionTimestamp != nil:
			out = append(out, fmt.Sprintf("  %-40s leaving (terminating)", key))
		case refused:
			out = append(out, fmt.Sprintf("  %-40s refused: %s", key, msg))
		case live:
			out = append(out, fmt.Sprintf("  %-40s waiting its turn", key))
		default:
			out = append(out, fmt.Sprintf("  %-40s %s", key, p.Status.Phase))
		}
	}
	return out
}

// nodeEvents are the last Events of the node and of its drain's pods.
func nodeEvents(events []*corev1.Event, name string) []string {
	var out []string
	for _, e := range events {
		if len(out) == maxNodeEvents+1 {
			break
		}
		if e.InvolvedObject.Name != name && evictionOf(e) != name {
			continue
		}
		if len(out) == 0 {
			out = append(out, "Events:")
		}
		out = append(out, fmt.Sprintf("  %s  %-16s %s", eventTime(e).Local().Format(time.TimeOnly), e.Reason, strings.TrimPrefix(e.Message, "sluice: ")))
	}
	return out
}

// evictionOf is the node whose drain an EvictionBlocked Event is about.
func evictionOf(e *corev1.Event) string {
	if e.Reason != "EvictionBlocked" {
		return ""
	}
	if m := evictionBlocked.FindStringSubmatch(e.Message); m != nil {
		return m[1]
	}
	return ""
}
