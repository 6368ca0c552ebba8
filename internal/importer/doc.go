// Package importer translates what a cluster runs today into sluice's own
// settings: Karpenter v1 NodePools and an AKS agent pool's upgrade settings
// into sluice NodePools, kured's flags into a NodePool's spec.reboot, and an
// aws-node-termination-handler release into the sluice chart's values.
//
// Every field read is accounted for in the Result's Report: it maps, it maps
// but means something else in sluice (Differs, with what differs), or it does
// not map (NotMapped, with why). The package reads and returns values only;
// reading files or the cluster, and printing, are the caller's.
package importer
