package kwok

import (
	"fmt"
	"regexp"

	"github.com/sluice-dev/sluice/internal/provider"
)

// images is the simulated cloud's gallery: it publishes every image named
// like an AKS node image version (AKSUbuntu-2204gen2containerd-202611.01.0),
// an Azure Linux one, an AMI ID (ami-0c2d3e8f1a9b7c6d5), or the sandbox's
// generic img-N. A real provider asks its cloud.
var images = regexp.MustCompile(`^((AKSUbuntu|AKSAzureLinux|AzureLinux)-[A-Za-z0-9]+-[0-9]{6}\.[0-9]{2}\.[0-9]+|ami-[0-9a-f]{8,17}|img-[0-9]+)$`)

// CheckImage says whether the simulated cloud has the image; "" (no image
// asked for) always works.
func CheckImage(image string) error {
	if image == "" || images.MatchString(image) {
		return nil
	}
	return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
		"the kwok provider has no image %q: it publishes AKS node image versions (AKSUbuntu-2204gen2containerd-202611.01.0), Azure Linux ones, AMI IDs (ami-0c2d3e8f1a9b7c6d5) and img-N", image)}
}
