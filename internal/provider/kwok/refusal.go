package kwok

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// insufficientCapacity is the cloud's answer when it has no machine of the
// type to give: it may have one later.
func insufficientCapacity(typ catalog.Type, capacity v1alpha1.CapacityType, zone string) *provider.Error {
	var msg string
	switch {
	case typ.Cloud == catalog.AWS:
		msg = fmt.Sprintf("InsufficientInstanceCapacity: We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). "+
			"Our system will be working on provisioning additional capacity.", typ.Name, zone)
	case capacity == v1alpha1.CapacitySpot:
		msg = fmt.Sprintf("SkuNotAvailable: The requested VM size %s is currently not available for Spot in location %s zone %s. "+
			"Please try another size or deploy to a different location or zones.", typ.Name, typ.Region, zone)
	default:
		msg = fmt.Sprintf("AllocationFailed: Allocation failed. We do not have sufficient capacity for the requested VM size %s in zone %s. "+
			"Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance", typ.Name, zone)
	}
	return &provider.Error{Code: provider.CodeInsufficientCapacity, Message: msg, Retryable: true}
}

// quotaExceeded is the cloud's answer when the machine would take the account
// past its quota: only a person raising the quota helps.
func quotaExceeded(typ catalog.Type, capacity v1alpha1.CapacityType) *provider.Error {
	cpus := typ.CPU.Value()
	var msg string
	switch {
	case typ.Cloud == catalog.AWS && capacity == v1alpha1.CapacitySpot:
		msg = "MaxSpotInstanceCountExceeded: Max spot instance count exceeded"
	case typ.Cloud == catalog.AWS:
		msg = "VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance bucket " +
			"that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
	default:
		quota := azureFamily(typ.Name) + " Cores"
		if capacity == v1alpha1.CapacitySpot {
			quota = "Low Priority Cores"
		}
		msg = fmt.Sprintf("OperationNotAllowed: Operation could not be completed as it results in exceeding approved %s quota. "+
			"Additional details - Deployment Model: Resource Manager, Location: %s, Current Limit: 0, Current Usage: 0, "+
			"Additional Required: %d, (Minimum) New Limit Required: %d. Submit a request for Quota increase at https://aka.ms/ProdportalCRP",
			quota, typ.Region, cpus, cpus)
	}
	return &provider.Error{Code: provider.CodeQuotaExceeded, Message: msg}
}

// azureFamily returns the quota family of an Azure size as Azure names it:
// Standard_D4s_v5 is standardDSv5Family, Standard_B2s standardBSFamily.
func azureFamily(size string) string {
	name, version, _ := strings.Cut(strings.TrimPrefix(size, "Standard_"), "_")
	letters := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, name)
	if letters == "" {
		return "standard" + size + "Family"
	}
	return "standard" + letters[:1] + strings.ToUpper(letters[1:]) + version + "Family"
}

// ThrottledRetryAfter is the Retry-After of the simulated cloud's throttled
// answers.
const ThrottledRetryAfter = 20 * time.Second

// throttled is the cloud's answer when the account is over its request
// rate, once the SDK's own retries are spent: it asks to be left alone for
// a while.
func throttled(typ catalog.Type) *provider.Error {
	msg := "RequestLimitExceeded: Request limit exceeded."
	if typ.Cloud != catalog.AWS {
		msg = "TooManyRequests: The request is being throttled as the limit has been reached for operation group Microsoft.Compute/VMScaleSetBatchedVMRequests. Retry-After: 20"
	}
	return &provider.Error{Code: provider.CodeThrottled, Message: msg, Retryable: true, RetryAfter: ThrottledRetryAfter}
}
