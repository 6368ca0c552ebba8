package clusterapi

import "k8s.io/apimachinery/pkg/runtime/schema"

// sluice does not import Cluster API's Go types (docs/design/cluster-api.md,
// "Modules"): it reads and writes the few fields it needs as unstructured
// objects at cluster.x-k8s.io/v1beta2, the storage version of every core CRD.
// api_test.go checks each field path against the CRDs' schemas.

// Group and Version are Cluster API's core API group and the version sluice
// speaks.
const (
	Group   = "cluster.x-k8s.io"
	Version = "v1beta2"
)

// The core resources sluice reads or writes.
var (
	Clusters            = gvr("clusters")
	Machines            = gvr("machines")
	MachineSets         = gvr("machinesets")
	MachineDeployments  = gvr("machinedeployments")
	MachineDrainRules   = gvr("machinedrainrules")
	MachineHealthChecks = gvr("machinehealthchecks")
)

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: resource}
}

// Cluster API's annotations and labels, by the names its book gives them.
const (
	// AnnotationDeleteMachine marks the Machine a MachineSet removes first
	// when it scales down; only its presence counts.
	AnnotationDeleteMachine = "cluster.x-k8s.io/delete-machine"
	// AnnotationPreDrainHook is sluice's pre-drain deletion hook: while a
	// deleting Machine carries one, Cluster API neither cordons nor drains it.
	AnnotationPreDrainHook = "pre-drain.delete.hook.machine.cluster.x-k8s.io/sluice"
	// AnnotationExcludeDraining makes Cluster API skip its own cordon and
	// drain of the Machine's Node.
	AnnotationExcludeDraining = "machine.cluster.x-k8s.io/exclude-node-draining"
	// AnnotationRemediateMachine asks the MachineHealthCheck to remediate
	// the Machine (a person's manual trigger).
	AnnotationRemediateMachine = "cluster.x-k8s.io/remediate-machine"
	// LabelClusterName names a Machine's Cluster.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelDeploymentName names a Machine's MachineDeployment.
	LabelDeploymentName = "cluster.x-k8s.io/deployment-name"
	// LabelDrain is the pod label that overrides MachineDrainRules
	// ("skip", "wait-completed").
	LabelDrain = "cluster.x-k8s.io/drain"
	// AnnotationAutoscalerMin and AnnotationAutoscalerMax are
	// cluster-autoscaler's: a MachineDeployment carrying them has its
	// replicas written by the autoscaler.
	AnnotationAutoscalerMin = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AnnotationAutoscalerMax = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	// AnnotationPaused pauses Cluster API's reconciliation of an object.
	AnnotationPaused = "cluster.x-k8s.io/paused"
	// LabelTopologyOwned marks objects a ClusterClass topology manages.
	LabelTopologyOwned = "topology.cluster.x-k8s.io/owned"
	// AnnotationRevision is a MachineSet's MachineDeployment revision.
	AnnotationRevision = "machinedeployment.clusters.x-k8s.io/revision"
)
