package aksagentpool

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// Codes of refusals the provider.Code constants do not name.
const (
	// CodeAccessDenied: the controller's identity lacks a permission on
	// the cluster.
	CodeAccessDenied = azurearm.CodeAccessDenied
	// CodeOperationInProgress: AKS runs another operation on the agent
	// pool (an upgrade, a scale someone else asked for) and takes no
	// other until it ends, or the pool changed since the provider read
	// it (a 412 to If-Match: assumed, not seen from AKS); asking again
	// later works.
	CodeOperationInProgress = "OperationInProgress"
	// CodeOperationNotAllowed: AKS refused the change for a reason of the
	// pool's own (stopped, at a limit) that lasts until a person changes
	// it; AKS's message says which.
	CodeOperationNotAllowed = "OperationNotAllowed"
	// CodeCapacityChangedElsewhere: the pool's machines changed in a way
	// the provider's claims do not explain (a cluster autoscaler or a
	// person scaled it), so the provider cannot tell which machine is the
	// one it asked for.
	CodeCapacityChangedElsewhere = "CapacityChangedElsewhere"
	// CodeAutoscaled: the agent pool has AKS's cluster autoscaler on,
	// which would fight sluice over its count.
	CodeAutoscaled = "AutoscalerEnabled"
)

// refusal turns an Azure error into the provider's terms
// (azurearm.Refusal), adding AKS's own codes and keeping AKS's message for
// people.
func refusal(what string, err error) error {
	return azurearm.Refusal(what, err, aksRefusal)
}

// aksRefusal maps AKS's codes that azurearm.Refusal does not.
func aksRefusal(re *azcore.ResponseError, e *provider.Error) bool {
	switch code := re.ErrorCode; {
	case code == "QuotaExceeded", code == "ErrCode_InsufficientVCPUQuota",
		code == "OperationNotAllowed" && strings.Contains(strings.ToLower(message(re)), "quota"):
		e.Code = provider.CodeQuotaExceeded
		e.Message += ": " + message(re)
	case code == "OperationNotAllowed" && inProgress(message(re)), code == "AgentPoolUpgradeInProgress",
		code == "PreconditionFailed", re.StatusCode == http.StatusPreconditionFailed:
		e.Code, e.Retryable = CodeOperationInProgress, true
		e.Message += ": " + message(re)
	case code == "OperationNotAllowed":
		// Anything else AKS does not allow (a stopped pool, a count past
		// its limits) stays so until a person changes the pool.
		e.Code = CodeOperationNotAllowed
		e.Message += ": " + message(re)
	case code == "ResourceNotFound", code == "NotFound", code == "ParentResourceNotFound", code == "ResourceGroupNotFound":
		e.Code = provider.CodeInvalidTemplate
		e.Message += ": the agent pool, its cluster or its resource group does not exist in this subscription"
	case code == "InvalidParameter", code == "BadRequest":
		e.Code = provider.CodeInvalidTemplate
		e.Message += ": " + message(re)
	default:
		return false
	}
	return true
}

// inProgress says whether AKS's message is its "another operation is in
// progress" ("Operation is not allowed: Another operation (Scaling) is in
// progress, please wait for it to finish before starting a new operation",
// or "Another agentpool operation (nodepool1 - Creating) is in progress").
func inProgress(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "another") && strings.Contains(msg, "in progress")
}

// message is the message of ARM's error body ({"error":{"code","message"}},
// or an operation status's {"error":...}), or the code when there is none.
func message(re *azcore.ResponseError) string {
	if re.RawResponse != nil {
		body, err := runtime.Payload(re.RawResponse)
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err == nil && json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return e.Error.Message
		}
	}
	return re.ErrorCode
}

// isNotFound says whether Azure answered that the resource is not there.
func isNotFound(err error) bool { return azurearm.IsNotFound(err) }
