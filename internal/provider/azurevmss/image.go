package azurevmss

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
)

// An image, as spec.template.image names it and Machine.Image reports it,
// is one of the forms of a scale set model's imageReference
// (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/create-or-update#imagereference):
//
//   - a platform (Marketplace) image's URN, publisher:offer:sku:version, as
//     `az vm create --image` takes it and `az vm image list` prints it:
//     Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202411120;
//   - a managed image's resource ID,
//     /subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/images/NAME;
//   - an Azure Compute Gallery image version's resource ID,
//     /subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/galleries/GALLERY/images/IMAGE/versions/VERSION
//     (an AKS node image is one, in AKS's own subscription).
//
// The version is always named, never "latest" nor a gallery image without
// its version: a node's image is compared with the template's, and Azure
// reports what an instance booted (a platform image's exactVersion, the
// gallery version's ID), which "latest" never equals.
var (
	managedImageID   = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/images/[^/]+$`)
	galleryVersionID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/galleries/[^/]+/images/[^/]+/versions/([^/]+)$`)
)

// CheckImage says whether image is in one of the forms the provider takes
// ("" is: the set's model stays as it is).
func CheckImage(image string) error {
	if image == "" {
		return nil
	}
	_, err := imageReference(image)
	return err
}

// imageReference is the model's imageReference that boots image.
func imageReference(image string) (*armcompute.ImageReference, error) {
	if strings.HasPrefix(image, "/") {
		m := galleryVersionID.FindStringSubmatch(image)
		if m != nil && !strings.EqualFold(m[1], "latest") || managedImageID.MatchString(image) {
			return &armcompute.ImageReference{ID: &image}, nil
		}
		return nil, badImage(image)
	}
	f := strings.Split(image, ":")
	if len(f) != 4 || strings.ContainsAny(image, "/ \t\n") || strings.EqualFold(f[3], "latest") {
		return nil, badImage(image)
	}
	for _, s := range f {
		if s == "" {
			return nil, badImage(image)
		}
	}
	return &armcompute.ImageReference{Publisher: &f[0], Offer: &f[1], SKU: &f[2], Version: &f[3]}, nil
}

func badImage(image string) error {
	return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
		"azure-vmss takes no image %q: name a platform image's URN publisher:offer:sku:version with its version (not latest), "+
			"a managed image's ID /subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/images/NAME, "+
			"or a Compute Gallery image version's ID /subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/galleries/GALLERY/images/IMAGE/versions/VERSION", image)}
}

// imageOf is the image an imageReference names, "" for none or a form the
// provider does not take (a shared or community gallery's unique ID). exact
// takes a platform image's exactVersion, which Azure reports on an instance
// (the version it booted when the model said latest).
func imageOf(r *armcompute.ImageReference, exact bool) string {
	switch {
	case r == nil:
		return ""
	case str(r.ID) != "":
		return *r.ID
	case str(r.Publisher) == "" || str(r.Offer) == "" || str(r.SKU) == "":
		return ""
	}
	version := str(r.Version)
	if exact && str(r.ExactVersion) != "" {
		version = *r.ExactVersion
	}
	return *r.Publisher + ":" + *r.Offer + ":" + *r.SKU + ":" + version
}

// modelImage is the image the set's model boots new instances from.
func modelImage(set *armcompute.VirtualMachineScaleSet) string {
	if p := set.Properties; p != nil && p.VirtualMachineProfile != nil && p.VirtualMachineProfile.StorageProfile != nil {
		return imageOf(p.VirtualMachineProfile.StorageProfile.ImageReference, false)
	}
	return ""
}

// imagePatch is the PATCH of the model's imageReference to want: the other
// form's fields are sent as null, since a PATCH merges objects
// (JSON merge patch) and a reference with both an id and a URN is refused.
func imagePatch(want *armcompute.ImageReference) armcompute.VirtualMachineScaleSetUpdate {
	null := azcore.NullValue[*string]()
	ref := armcompute.ImageReference{ID: null, Publisher: null, Offer: null, SKU: null, Version: null,
		SharedGalleryImageID: null, CommunityGalleryImageID: null}
	if want.ID != nil {
		ref.ID = want.ID
	} else {
		ref.Publisher, ref.Offer, ref.SKU, ref.Version = want.Publisher, want.Offer, want.SKU, want.Version
	}
	return armcompute.VirtualMachineScaleSetUpdate{Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{
		VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{
			StorageProfile: &armcompute.VirtualMachineScaleSetUpdateStorageProfile{ImageReference: &ref}}}}
}
