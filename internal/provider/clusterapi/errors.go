package clusterapi

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sluice-dev/sluice/internal/provider"
)

// Codes of refusals the provider.Code constants do not name.
const (
	// CodeAutoscalerEnabled: the target carries cluster-autoscaler's
	// min/max size annotations, so the autoscaler writes its replicas too;
	// sluice must be their only writer.
	CodeAutoscalerEnabled = "AutoscalerEnabled"
	// CodeTopologyOwned: a ClusterClass topology owns the target and
	// writes its replicas from the Cluster's topology.
	CodeTopologyOwned = "TopologyOwned"
	// CodeClusterPaused: the Cluster (or the target) is paused, so Cluster
	// API would make or delete no Machine; it passes when it is resumed.
	CodeClusterPaused = "ClusterPaused"
	// CodeRolloutInProgress: the MachineDeployment is rolling out (more
	// than one of its MachineSets holds replicas), and a lower replicas
	// count would be the rollout planner's to place, not the machine's.
	CodeRolloutInProgress = "RolloutInProgress"
	// CodeDeletionInProgress: the machine's MachineSet has a Machine
	// deleting already, which Cluster API would count against a lower
	// replicas count first (and whose replacement would then never come).
	CodeDeletionInProgress = "DeletionInProgress"
	// CodeCreationInProgress: Cluster API has not yet made the Machines of
	// the replicas last raised; a change now could cancel the raise.
	CodeCreationInProgress = "CreationInProgress"
	// CodeAnotherMachineMarked: another Machine of the MachineSet carries
	// cluster.x-k8s.io/delete-machine that sluice did not write, so a lower
	// replicas count might take that one instead.
	CodeAnotherMachineMarked = "AnotherMachineMarked"
	// CodeCapacityChangedElsewhere: the target's replicas or Machines
	// changed in a way the claims do not explain (a person's kubectl scale,
	// an autoscaler), so the provider cannot tell its machine from theirs
	// until Cluster API has made them.
	CodeCapacityChangedElsewhere = "CapacityChangedElsewhere"
	// CodeConflict: the target changed between the provider's read and its
	// write of replicas, again after the provider read it anew; nothing
	// was changed.
	CodeConflict = "Conflict"
	// CodeMachineNotListed: replicas were raised for a machine and Cluster
	// API has not made its Machine yet.
	CodeMachineNotListed = "MachineNotListed"
	// CodeAccessDenied: the controller may not read or write the object.
	CodeAccessDenied = "AccessDenied"
)

// refusal turns the API server's answer into the provider's terms. An
// error the API server did not answer (a lost connection, a deadline) is
// returned as it is: the request may have been carried out.
func refusal(what string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("%s: %w", what, err)
	}
	e := &provider.Error{Message: what + ": " + err.Error()}
	switch {
	case apierrors.IsConflict(err):
		e.Code, e.Retryable = CodeConflict, true
	case apierrors.IsTooManyRequests(err):
		e.Code, e.Retryable = provider.CodeThrottled, true
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		e.Code = provider.CodeInvalidTemplate
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		e.Code = CodeAccessDenied
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}

// answered says whether the API server answered the request (refused it):
// then it did nothing.
func answered(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
