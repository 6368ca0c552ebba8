package azurevmss

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var _ provider.RegistrationChecker = (*Provider)(nil)

// CheckRegistration reads each of the pool's scale set models' user data
// (Azure returns it only when asked: $expand=userData) and names the sets
// whose kubelet would join without the unregistered taint. A set with no
// user data (an AKS node pool's: AKS writes the kubelet's flags in a
// customData Azure never returns) cannot be told: the answer wraps
// provider.ErrCannotTell and says where AKS keeps the taint.
func (p *Provider) CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	spec := pool.Spec.Provider.Azure
	if spec == nil {
		return "", nil // Create refuses the pool, saying why
	}
	var missing, unseen []string
	for _, s := range spec.ScaleSets {
		r := ref{spec.SubscriptionID, spec.ResourceGroup, s.Name}
		cl, err := p.clientsFor(r.subscription)
		if err != nil {
			return "", err
		}
		got, err := cl.sets.Get(ctx, r.resourceGroup, r.scaleSet,
			&armcompute.VirtualMachineScaleSetsClientGetOptions{Expand: to.Ptr(armcompute.ExpandTypesForGetVMScaleSetsUserData)})
		if err != nil {
			return "", refusal("reading scale set "+r.String(), err)
		}
		var userData string
		if props := got.Properties; props != nil && props.VirtualMachineProfile != nil {
			userData = str(props.VirtualMachineProfile.UserData)
		}
		switch {
		case userData == "":
			unseen = append(unseen, r.String())
		case !RegistersUnregisteredTaint(userData):
			missing = append(missing, r.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("the model's user data of scale set %s does not start the kubelet with --register-with-taints=%s=true:NoExecute",
			strings.Join(missing, ", "), contract.TaintUnregistered), nil
	}
	if len(unseen) > 0 {
		return "", fmt.Errorf("scale set %s has no user data to read (an AKS node pool's kubelet flags are AKS's: on AKS use the %s provider, which reads the cluster's node initialization taints for %s=true:NoExecute): %w",
			strings.Join(unseen, ", "), v1alpha1.ProviderAKS, contract.TaintUnregistered, provider.ErrCannotTell)
	}
	return "", nil
}
