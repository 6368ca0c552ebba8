package awsasg

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var _ provider.RegistrationChecker = (*Provider)(nil)

// CheckRegistration reads the launch template versions the pool's groups
// launch from, and names those whose machines would join without the
// unregistered taint: user data that is not AL2023's (to which Create adds
// the taint) and does not register it itself.
func (p *Provider) CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	spec := pool.Spec.Provider.AWS
	if spec == nil {
		return "", nil // Create refuses the pool, saying why
	}
	var missing []string
	for _, g := range spec.AutoScalingGroups {
		group, err := p.group(ctx, g.Name)
		if err != nil {
			return "", err
		}
		offers, err := p.offers(ctx, pool, g, group)
		if err != nil {
			return "", err
		}
		for _, o := range offers {
			v := o.version
			what := fmt.Sprintf("launch template %s version %d (group %s)", aws.ToString(v.LaunchTemplateName), aws.ToInt64(v.VersionNumber), g.Name)
			if slices.Contains(missing, what) || joinsTainted(userDataOf(v.LaunchTemplateData)) {
				continue
			}
			missing = append(missing, what)
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("%s: its user data is not AL2023's (nodeadm), to which sluice adds the %s taint, and does not register the kubelet with it",
		strings.Join(missing, ", "), contract.TaintUnregistered), nil
}

// joinsTainted says whether a machine launched with the user data (decoded)
// registers with the unregistered taint: it says so itself, or Create adds
// it.
func joinsTainted(userData string) bool {
	_, added := withUnregisteredTaint(userData)
	return added || RegistersUnregisteredTaint(userData)
}

// userDataOf is a launch template version's user data, decoded; "" when it
// has none or it is not base64.
func userDataOf(data *ec2types.ResponseLaunchTemplateData) string {
	if data == nil || data.UserData == nil {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(*data.UserData)
	if err != nil {
		return ""
	}
	return string(b)
}
