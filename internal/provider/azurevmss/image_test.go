package azurevmss_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

const (
	jammyOld = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202410020"
	jammyNew = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202411120"
	galleryV = "/subscriptions/" + azuretest.Subscription + "/resourceGroups/images/providers/Microsoft.Compute/galleries/nodes/images/ubuntu/versions/1.2.3"
	managed  = "/subscriptions/" + azuretest.Subscription + "/resourceGroups/images/providers/Microsoft.Compute/images/node-2024-11"
)

func urn(publisher, offer, sku, version string) armcompute.ImageReference {
	return armcompute.ImageReference{Publisher: &publisher, Offer: &offer, SKU: &sku, Version: &version}
}

func withImage(np *v1alpha1.NodePool, image string) *v1alpha1.NodePool {
	np.Spec.Template = &v1alpha1.NodeTemplate{Image: image}
	return np
}

// vmss reads the cloud as Azure's own client does, not through the provider.
func vmss(t *testing.T, w *world) (*armcompute.VirtualMachineScaleSetsClient, *armcompute.VirtualMachineScaleSetVMsClient) {
	t.Helper()
	f, err := armcompute.NewClientFactory(azuretest.Subscription, &azfake.TokenCredential{},
		&arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: w.cloud.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	return f.NewVirtualMachineScaleSetsClient(), f.NewVirtualMachineScaleSetVMsClient()
}

// A template's image is what the new instance boots: the set's model is
// changed first (a PATCH of its imageReference, whichever form it had),
// then its capacity raised; the instances there before keep their image
// and report that their model is not the latest.
func TestCreateBootsTheTemplatesImage(t *testing.T) {
	for _, tt := range []struct {
		name  string
		model armcompute.ImageReference
		want  string
	}{
		{"a platform image's next version", urn("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202410020"), jammyNew},
		{"an AKS node image to a platform image", armcompute.ImageReference{}, jammyNew},
		{"a platform image to a gallery image version", urn("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202410020"), galleryV},
		{"a gallery image version to a managed image", armcompute.ImageReference{ID: to.Ptr(galleryV)}, managed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 2, azuretest.Model{Image: tt.model})
			p := w.provider(3)
			np := withImage(pool("web", "aks-web-vmss"), tt.want)

			m, err := p.Create(ctx(t), np, "web-a1b2c")
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if m.Image != tt.want || instance(t, m) != "2" {
				t.Errorf("machine is instance %s with image %q, want instance 2 with %q", instance(t, m), m.Image, tt.want)
			}
			sets, vms := vmss(t, w)
			set, err := sets.Get(ctx(t), azuretest.ResourceGroup, "aks-web-vmss", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Properties.VirtualMachineProfile.StorageProfile.ImageReference; got.ID == nil && tt.want[0] == '/' || got.ID != nil && *got.ID != tt.want {
				t.Errorf("the model's imageReference = %+v, want %s", got, tt.want)
			}
			old, err := vms.Get(ctx(t), azuretest.ResourceGroup, "aks-web-vmss", "0", nil)
			if err != nil {
				t.Fatal(err)
			}
			if *old.Properties.LatestModelApplied {
				t.Error("instance 0 reports the latest model applied; it was made from the one before")
			}
			before := p.NameOf(nodeOf("0"))
			if got, err := p.Get(ctx(t), before); err != nil || got.Image == tt.want || got.Image == "" {
				t.Errorf("instance 0 = %+v, %v; want the image it was made from", got, err)
			}
			if _, err := p.Create(ctx(t), np, "web-d3e4f"); err != nil {
				t.Fatalf("second create: %v", err)
			}
			if n := w.cloud.Count(http.MethodPatch, "aks-web-vmss"); n != 3 {
				t.Errorf("%d PATCHes of the set, want 3: one model change, two scale-outs", n)
			}
		})
	}
}

// The image Machine.Image reports for a platform image is the version the
// instance booted (its exactVersion), in the template's form, so a model
// that said latest is drift against a template that names a version only
// when the versions differ.
func TestAnInstancesImageIsTheVersionItBooted(t *testing.T) {
	w := newWorld()
	w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 1, azuretest.Model{
		Image: urn("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "latest")})
	p := w.provider(3)
	got, err := p.Get(ctx(t), p.NameOf(nodeOf("0")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:" + azuretest.LatestPlatformVersion; got.Image != want {
		t.Errorf("image = %q, want %q", got.Image, want)
	}
}

// A set whose upgradePolicy.mode is Automatic or Rolling would have Azure
// reimage its instances to a new model without a drain: its model is not
// changed, and the refusal says what to set. With the model already on the
// template's image, nothing changes and the set is scaled out.
func TestASetAzureWouldRollIsRefusedANewImage(t *testing.T) {
	for _, mode := range []armcompute.UpgradeMode{armcompute.UpgradeModeAutomatic, armcompute.UpgradeModeRolling} {
		t.Run(string(mode), func(t *testing.T) {
			w := newWorld()
			w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 1, azuretest.Model{
				Image: urn("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202410020"), UpgradeMode: mode})
			p := w.provider(3)
			_, err := p.Create(ctx(t), withImage(pool("web", "aks-web-vmss"), jammyNew), "web-a1b2c")
			pe, ok := provider.AsError(err)
			if !ok || pe.Code != provider.CodeInvalidTemplate || pe.Retryable || !strings.Contains(pe.Message, "upgradePolicy.mode to Manual") {
				t.Fatalf("create = %v, want an InvalidTemplate refusal saying to set upgradePolicy.mode to Manual", err)
			}
			if n := w.cloud.Count(http.MethodPatch, ""); n != 0 {
				t.Errorf("%d PATCHes, want none", n)
			}
			m, err := p.Create(ctx(t), withImage(pool("web", "aks-web-vmss"), jammyOld), "web-d3e4f")
			if err != nil || m.Image != jammyOld {
				t.Errorf("create on the model's own image = %+v, %v; want it made", m, err)
			}
		})
	}
}

// A template naming no image leaves the model as it is.
func TestNoImageLeavesTheModel(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	m, err := w.provider(3).Create(ctx(t), withImage(pool("web", "aks-web-vmss"), ""), "web-a1b2c")
	if err != nil || m.Image != azuretest.AKSImage {
		t.Fatalf("create = %+v, %v; want a machine on the model's image %s", m, err, azuretest.AKSImage)
	}
	if n := w.cloud.Count(http.MethodPatch, ""); n != 1 {
		t.Errorf("%d PATCHes, want the scale-out's only", n)
	}
}

func TestCheckImage(t *testing.T) {
	if !azurevmss.Registration.Images.Sets() || azurevmss.Registration.Images.Check == nil {
		t.Fatal("azure-vmss does not say it sets images, or has no check")
	}
	for image, ok := range map[string]bool{
		"":                        true,
		jammyNew:                  true,
		galleryV:                  true,
		managed:                   true,
		azuretest.AKSImage:        true,
		strings.ToLower(galleryV): true,
		"Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest":                     false,
		"Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2":                            false,
		"Canonical::22_04-lts-gen2:22.04.202411120":                                        false,
		"Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202411120:x":          false,
		strings.TrimSuffix(galleryV, "/versions/1.2.3"):                                    false,
		strings.TrimSuffix(galleryV, "1.2.3") + "latest":                                   false,
		"/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm": false,
		"AKSUbuntu-2204gen2containerd-202411.12.0":                                         false,
		"ami-0c2d3e8f1a9b7c6d5":                                                            false,
		"/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/a/b":         false,
	} {
		err := azurevmss.Registration.Images.Check(image)
		if ok != (err == nil) {
			t.Errorf("Check(%q) = %v, want ok %v", image, err, ok)
		}
		if pe, isRefusal := provider.AsError(err); err != nil && (!isRefusal || pe.Code != provider.CodeInvalidTemplate || !strings.Contains(pe.Message, "publisher:offer:sku:version")) {
			t.Errorf("Check(%q) = %v, want an InvalidTemplate naming the accepted forms", image, err)
		}
	}
}

// nodeOf is the Node of an instance of aks-web-vmss, as
// cloud-provider-azure names it.
func nodeOf(id string) *corev1.Node {
	return &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/" + azuretest.Subscription +
		"/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-vmss/virtualMachines/" + id}}
}

// Azure changes the model but its answer is lost (a reset connection):
// Create fails retryably with nothing claimed and no instance added, and
// asking again finds the model changed, changes it no more, and makes one
// instance. With the SDK's retries, the repeated PATCH asks for what is
// already there and the one Create succeeds.
func TestALostAnswerOfTheModelChangeNeitherLeaksNorDoubles(t *testing.T) {
	for _, retries := range []int32{-1, 3} { // -1: none (0 is the SDK's default, 3)
		t.Run(fmt.Sprintf("%d retries", max(retries, 0)), func(t *testing.T) {
			w := newWorld()
			w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 2, azuretest.Model{
				Image: urn("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202410020")})
			dropped := 0
			w.cloud.DropAnswer = func(r azuretest.Request) bool {
				if r.Method == http.MethodPatch && dropped == 0 {
					dropped++
					return true
				}
				return false
			}
			p := w.provider(retries)
			np := withImage(pool("web", "aks-web-vmss"), jammyNew)

			m, err := p.Create(ctx(t), np, "web-a1b2c")
			if retries < 0 {
				if _, refused := provider.AsError(err); err == nil || refused {
					t.Fatalf("create with the answer lost = %+v, %v; want an error that is not a refusal (asked again)", m, err)
				}
				if c, err := w.claims.Get(ctx(t), "web-a1b2c"); err != nil || c != nil {
					t.Errorf("claim after the lost answer = %+v, %v; want none: nothing was asked for", c, err)
				}
				if n := len(w.cloud.Instances("aks-web-vmss")); n != 2 {
					t.Errorf("%d instances after the lost answer, want 2", n)
				}
				m, err = p.Create(ctx(t), np, "web-a1b2c")
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if m.Image != jammyNew || instance(t, m) != "2" {
				t.Errorf("machine = instance %s on %q, want instance 2 on %s", instance(t, m), m.Image, jammyNew)
			}
			if n := len(w.cloud.Instances("aks-web-vmss")); n != 3 {
				t.Errorf("%d instances, want 3", n)
			}
			// The model's PATCH (its answer lost; again by the SDK's retry)
			// and one scale-out.
			if n, want := w.cloud.Count(http.MethodPatch, "aks-web-vmss"), 2+min(retries+1, 1); n != int(want) {
				t.Errorf("%d PATCHes, want %d: the model's (its answer lost, retried by the SDK if it may) and one scale-out", n, want)
			}
			if claims, err := w.claims.List(ctx(t)); err != nil || len(claims) != 1 || claims[0].InstanceID != "2" {
				t.Errorf("claims = %+v, %v; want the one machine's, of instance 2", claims, err)
			}
		})
	}
}
