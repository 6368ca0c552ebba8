// Package nodepool connects nodes to their NodePool: it installs the NodePool
// CRD the Helm chart ships, lists the pools, and picks the one pool whose
// policy applies to a node. A node that no pool selects gets the defaults of
// v1alpha1.MaintenanceSpec and nothing else.
package nodepool
