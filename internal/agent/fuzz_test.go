package agent

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// FuzzProviderID reads arbitrary node providerIDs as the agent does to pick
// its metadata source and, on Azure, the VM name Scheduled Events uses. A
// cloud is named only by its own scheme; a VM name is one path segment of
// an Azure providerID, scale-set instances as "<vmss>_<instance>".
func FuzzProviderID(f *testing.F) {
	for _, seed := range []string{
		"azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-user-1234-vmss/virtualMachines/3",
		"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/worker-7",
		"AZURE:///subscriptions/s/resourcegroups/rg/providers/microsoft.compute/VIRTUALMACHINES/Worker-7",
		"aws:///us-east-1a/i-0123456789abcdef0", "gce://my-project/europe-west1-b/gke-pool-1-abcd", "kwok://gpu-x7k2p",
		"azure:///virtualMachines/", "azure://", "azure:///a/virtualMachineScaleSets//virtualMachines/0", "azure:///virtualMachines/a/",
		"://", "", "azure:///x/virtualMachines/a\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, providerID string) {
		cloud, err := CloudOf(providerID)
		scheme, _, _ := strings.Cut(providerID, "://")
		want := map[string]maintenance.Source{"azure": maintenance.SourceAzure, "aws": maintenance.SourceAWS, "gce": maintenance.SourceGCP}[strings.ToLower(scheme)]
		if cloud != want || (err == nil) != (want != "") {
			t.Fatalf("CloudOf(%q) = %q, %v; want %q", providerID, cloud, err, want)
		}
		vm, err := azure.VMName(providerID)
		if got, want := vm, wantVM(providerID); got != want || (err == nil) != (want != "") {
			t.Fatalf("VMName(%q) = %q, %v; want %q", providerID, got, err, want)
		}
		if err == nil && cloud != maintenance.SourceAzure {
			t.Fatalf("VMName(%q) = %q, but the cloud is %q", providerID, vm, cloud)
		}
	})
}

// wantVM is the VM name an Azure providerID documents, by its last path
// segments: .../virtualMachineScaleSets/<set>/virtualMachines/<instance>
// or .../virtualMachines/<name>; "" when it names none.
func wantVM(providerID string) string {
	if !strings.HasPrefix(strings.ToLower(providerID), "azure://") {
		return ""
	}
	segs := strings.Split(providerID, "/")
	n := len(segs)
	switch {
	case n >= 5 && strings.EqualFold(segs[n-4], "virtualMachineScaleSets") && strings.EqualFold(segs[n-2], "virtualMachines") && segs[n-3] != "" && segs[n-1] != "":
		return segs[n-3] + "_" + segs[n-1]
	case n >= 3 && strings.EqualFold(segs[n-2], "virtualMachines") && segs[n-1] != "":
		return segs[n-1]
	}
	return ""
}
