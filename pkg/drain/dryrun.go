package drain

import (
	"fmt"
	"strings"
)

// simulate answers what a drain would do, entirely client-side, spending each
// budget's allowed disruptions as it goes so that it never promises an
// eviction the real drain would be refused. The budget left is shared by every
// node of the run.
func (nd *nodeDrain) simulate() NodeReport {
	rep := NodeReport{Outcome: NodeWouldDrain, Cordoned: nd.node.Spec.Unschedulable}
	takers := nd.takers
	blocked, waits := 0, 0
	for _, wave := range nd.waves() {
		for _, st := range wave {
			st.started.Store(true)
			switch st.class.verdict {
			case waitGone:
				st.outcome, st.reason, st.message = PodWouldEvict, ReasonTerminating, st.class.message
			case hold:
				if !nd.opts.Deadline.IsZero() && nd.opts.OnDeadline == OnDeadlineDelete {
					st.outcome, st.reason = PodWouldEvict, ReasonDeadlineForced
					st.message = fmt.Sprintf("%s; would be deleted %ds before the deadline", st.class.message, nd.podGrace(st)+2)
				} else {
					st.outcome, st.reason, st.message = PodWouldBlock, st.class.reason, st.class.message
					blocked++
				}
			default:
				st.outcome, st.message = PodWouldEvict, st.class.message
				if st.pdb == nil {
					continue
				}
				key := st.pdb.Namespace + "/" + st.pdb.Name
				left, seen := nd.dry[key]
				if !seen {
					left = st.pdb.Status.DisruptionsAllowed
				}
				if left > 0 {
					nd.dry[key] = left - 1
					takers[key] = append(takers[key], st.key)
					continue
				}
				nd.dry[key] = 0
				waits++
				st.outcome, st.reason = PodWouldWait, ReasonPDBBlocked
				st.message = fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s) now", st.pdb.Name, st.pdb.Status.DisruptionsAllowed)
				if len(takers[key]) > 0 {
					st.message += fmt.Sprintf(", taken by %s earlier in this drain", strings.Join(takers[key], ", "))
				}
				st.message += "; the drain would wait until replacements are Ready"
			}
		}
	}
	for _, st := range nd.states {
		if st.class.verdict == refuse {
			blocked++
		}
	}
	if blocked > 0 {
		rep.Outcome = NodeWouldBlock
		rep.Message = fmt.Sprintf("%d pod(s) cannot leave as things stand", blocked)
		if nd.opts.Deadline.IsZero() {
			rep.Message += "; the drain would evict nothing and not cordon the node"
		}
	} else if waits > 0 {
		rep.Message = fmt.Sprintf("%d pod(s) would wait for their disruption budgets", waits)
	}
	for _, pr := range nd.report(rep.Outcome, rep.Message, rep.Cordoned).Pods {
		switch pr.Outcome {
		case PodSkipped:
			pr.Outcome = PodWouldSkip
		case PodBlocked:
			pr.Outcome = PodWouldBlock
		}
		rep.Pods = append(rep.Pods, pr)
	}
	return rep
}
