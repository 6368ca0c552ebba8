package azurevmss

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// Codes of refusals the provider.Code constants do not name.
const (
	// CodeThrottled: Azure Resource Manager kept answering 429 after the
	// SDK's retries, each after the Retry-After Azure asked for.
	CodeThrottled = provider.CodeThrottled
	// CodeAccessDenied: the controller's identity lacks a permission
	// (docs/providers.md has the role definition).
	CodeAccessDenied = azurearm.CodeAccessDenied
	// CodeCapacityChangedElsewhere: the scale set's instances changed in a
	// way the provider's claims do not explain (a cluster autoscaler or a
	// person scaled it), so the provider cannot tell which instance is the
	// machine it asked for.
	CodeCapacityChangedElsewhere = "CapacityChangedElsewhere"
	// CodeForeignVM: a VM or scale set instance named by NameOf is in a
	// scale set no azure-vmss pool lists (or the pools cannot be listed),
	// so azure-vmss does not delete it.
	CodeForeignVM = "ForeignVM"
)

// refusal turns an Azure error into the provider's terms
// (azurearm.Refusal), adding Compute's own codes.
func refusal(what string, err error) error {
	return azurearm.Refusal(what, err, computeRefusal)
}

// computeRefusal maps Compute's codes that azurearm.Refusal does not.
func computeRefusal(re *azcore.ResponseError, e *provider.Error) bool {
	switch code := re.ErrorCode; {
	case code == "QuotaExceeded", code == "OperationNotAllowed" && strings.Contains(strings.ToLower(re.Error()), "quota"):
		e.Code = provider.CodeQuotaExceeded
	case code == "InvalidParameter", code == "ImageNotFound", code == "PlatformImageNotFound", code == "InvalidTemplate":
		e.Code = provider.CodeInvalidTemplate
	case code == "ResourceNotFound" || code == "ParentResourceNotFound" || code == "ResourceGroupNotFound":
		e.Code = provider.CodeInvalidTemplate
		e.Message += ": the scale set or its resource group does not exist in this subscription"
	default:
		return false
	}
	return true
}

// isNotFound says whether Azure answered that the resource is not there.
func isNotFound(err error) bool { return azurearm.IsNotFound(err) }
