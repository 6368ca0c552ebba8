package clusterapi

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/provider"
)

// Cluster API reconciles a MachineDeployment's replicas level by level, not
// change by change: a lowering to N-1 and a raise back to N within one of its
// passes cancel out, so the Machine marked for the decrement is never deleted
// and the raise's Machine never made (seen on v1.14.2: the MachineDeployment
// went 7 → 6 → 7 within 100 ms and its MachineSet stayed at 7). Changes the
// same way add up and are safe. So a change waits while the last one the
// other way has not shown yet: a decrement shows as its marked Machine
// deleting, a raise as a Machine for each replica.

// decrementPending refuses a raise (retryable) while sluice lowered the
// replicas and Cluster API has not begun deleting the marked Machine.
func decrementPending(t target, replicas int32, machines []*machine) error {
	for _, m := range machines {
		if marked, from, ours := markOf(m); marked && ours && !m.deleting() && from == replicas+1 {
			return &provider.Error{Code: CodeDeletionInProgress, Retryable: true, Message: fmt.Sprintf(
				"%s: Cluster API has not yet begun deleting Machine %s/%s, for which sluice lowered the replicas to %d; "+
					"raising them now would cancel that, so the raise waits", t, m.Namespace, m.Name, replicas)}
		}
	}
	return nil
}

// raisePending refuses a decrement (retryable) while the target has fewer
// Machines alive than replicas: Cluster API has yet to make some.
func raisePending(t target, replicas int32, machines []*machine) error {
	live := int32(0)
	for _, m := range machines {
		if !m.deleting() {
			live++
		}
	}
	if live < replicas {
		return &provider.Error{Code: CodeCreationInProgress, Retryable: true, Message: fmt.Sprintf(
			"%s: Cluster API has made %d of its %d replicas' Machines; lowering the replicas now could cancel a raise, so it waits",
			t, live, replicas)}
	}
	return nil
}
