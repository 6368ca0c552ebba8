package nodepool_test

import "testing"

// On AWS and Azure a Node is named by its kubelet (ip-10-0-3-7…,
// aks-…-vmss00000a), not after the machine sluice asked for: the controller
// finds a replacement by its providerID, notes the machine's name on it, and
// deletes the machine of a Node it drains by that name. These are the
// replacement, upgrade, deletion and restart scenes again, with the kwok
// provider naming Nodes so.
func TestCloudNamedNodes(t *testing.T) {
	cloudNames = true
	t.Cleanup(func() { cloudNames = false })
	for name, test := range map[string]func(*testing.T){
		"drift":      TestDriftReplacesEveryNodeWithinTheBudget,
		"delete":     TestDeletingANodeDrainsItFirst,
		"upgrade":    TestUpgradeSurgesAThirdAtATime,
		"restart":    TestUpgradeSurvivesAControllerRestart,
		"neverJoins": TestReplacementThatNeverJoinsLeavesTheOldNode,
	} {
		t.Run(name, test)
	}
}
