package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodePool says everything sluice may do to a group of nodes. A node that no
// NodePool selects gets the default maintenance actions and nothing else.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=np
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider.name`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Disrupting",type=integer,JSONPath=`.status.disrupting`
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.drifted`
// +kubebuilder:printcolumn:name="Upgrade",type=string,JSONPath=`.status.upgrade.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="On-Deadline",type=string,JSONPath=`.spec.maintenance.onDeadline`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.nodeSelector`,priority=1
// +kubebuilder:printcolumn:name="Actions",type=string,JSONPath=`.spec.maintenance.actions`,priority=1,description="Maintenance actions set here; any other event type takes its default"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// MaintenanceSpec returns the pool's maintenance policy, nil when the pool or
// its policy is nil; MaintenanceSpec's methods answer with the defaults then,
// so a node that no pool selects needs no special case:
//
//	pool.MaintenanceSpec().ActionFor(event.Type)
func (p *NodePool) MaintenanceSpec() *MaintenanceSpec {
	if p == nil {
		return nil
	}
	return p.Spec.Maintenance
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is what the pool's owner asks of sluice: which nodes belong,
// what makes and removes them, the node they should be, how they answer the
// cloud's maintenance, and when sluice may disrupt them of its own accord.
//
// +kubebuilder:validation:XValidation:rule="!has(self.repair) || !has(self.provider) || self.provider.name != 'none'",message="repair needs a provider that can reboot or replace the pool's machines (kwok, aws-asg, azure-vmss, aks-agentpool, gcp-mig); with provider none sluice cannot repair a node"
// +kubebuilder:validation:XValidation:rule="!has(self.repair) || !has(self.provider) || self.provider.name != 'cluster-api'",message="repair is off for cluster-api pools: their MachineHealthCheck is the repairer, and sluice drains the Machines it deletes (docs/providers.md#cluster-api)"
// +kubebuilder:validation:XValidation:rule="!has(self.reboot) || !has(self.provider) || self.provider.name != 'none'",message="reboot needs a provider that can reboot or replace the pool's machines; with provider none sluice cannot reboot a node"
// +kubebuilder:validation:XValidation:rule="!has(self.reboot) || !has(self.provider) || self.provider.name != 'cluster-api'",message="reboot is not supported for cluster-api pools: roll the MachineDeployment to a patched image instead"
type NodePoolSpec struct {
	// NodeSelector picks the pool's nodes by their labels. It must not be
	// empty: a pool that selects every node is almost always a mistake. A node
	// that several pools select follows the oldest of them.
	//
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.matchLabels) && size(self.matchLabels) > 0 || has(self.matchExpressions) && size(self.matchExpressions) > 0",message="nodeSelector must not be empty: set matchLabels or matchExpressions; a pool that selects every node is almost always a mistake (to mean it, use matchExpressions [{key: kubernetes.io/os, operator: Exists}])"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="nodeSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist (spelled so, capitalized)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['Exists', 'DoesNotExist'] ? !has(e.values) || size(e.values) == 0 : has(e.values) && size(e.values) > 0)",message="nodeSelector.matchExpressions[]: In and NotIn need at least one value; Exists and DoesNotExist take none"
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`

	// Provider creates and deletes the pool's machines: kwok for the
	// sandbox's simulated nodes, or none (the default), where sluice never
	// creates or deletes a machine: it moves pods for maintenance, and only
	// reports the nodes it would replace.
	//
	// +optional
	// +kubebuilder:default={name: none}
	Provider ProviderSpec `json:"provider,omitempty"`

	// Template is the node the pool's nodes should be. A node that differs
	// from it has drifted, and a pool with a provider replaces it.
	//
	// +optional
	Template *NodeTemplate `json:"template,omitempty"`

	// Disruption says when sluice may take the pool's nodes away of its own
	// accord (expiry, drift, consolidation) and how many at once.
	//
	// +optional
	// +kubebuilder:default={}
	Disruption *DisruptionSpec `json:"disruption,omitempty"`

	// Limits cap what the provider may create for the pool; a replacement
	// that would pass them waits.
	//
	// +optional
	Limits *Limits `json:"limits,omitempty"`

	// Maintenance says how the pool's nodes answer the cloud's maintenance
	// events. Left out, every event type takes its default action.
	//
	// +optional
	// +kubebuilder:default={}
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// Upgrade says how the pool rolls to a new node image
	// (spec.template.image): surge nodes first, each old node drained within
	// a timeout, soaked, then deleted (docs/upgrades.md). Left out, a new
	// image is drift like any other template field: each node replaced,
	// then deleted, as the budgets allow. `sluice upgrade pool` sets it.
	//
	// +optional
	Upgrade *UpgradeSpec `json:"upgrade,omitempty"`

	// Repair reboots, then replaces, nodes a condition says are broken
	// (docs/health.md). Off unless set: an upgrade of sluice never starts
	// repairing by itself.
	//
	// +optional
	Repair *RepairSpec `json:"repair,omitempty"`

	// Reboot drains and reboots the nodes whose OS asked for a reboot (the
	// agent's reboot-required sentinel), within the budgets and the reboot
	// windows (docs/health.md). Off unless set.
	//
	// +optional
	Reboot *RebootSpec `json:"reboot,omitempty"`
}

// UpgradeSpec tunes a pool's image upgrades, with the knobs of an AKS node
// pool upgrade.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxSurge) || !has(self.maxUnavailable) || !(string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])",message="upgrade.maxSurge and upgrade.maxUnavailable are both 0, so no node could ever be upgraded: set maxSurge (new nodes first, such as 33%) or maxUnavailable (nodes drained before their replacement is Ready)"
type UpgradeSpec struct {
	// MaxSurge is how many new machines are made ahead of the nodes they
	// replace: a number, or a percentage of the pool's nodes, rounded up;
	// default 10%.
	//
	// +optional
	// +kubebuilder:default="10%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[0-9]{1,2})%$')",message="maxSurge must be a number of nodes (0 or more) or a percentage from 0% to 100%, such as 33%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// MaxUnavailable is how many nodes may be drained before their
	// replacement is Ready: a number, or a percentage of the pool's nodes,
	// rounded down; default 0.
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[0-9]{1,2})%$')",message="maxUnavailable must be a number of nodes (0 or more) or a percentage from 0% to 100%, such as 10%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// DrainTimeout is how long one node may take to drain before
	// UndrainableNodeBehavior applies; default 30m.
	//
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="drainTimeout must be a duration of at least 10s, such as 30m"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// NodeSoakDuration is how long a drained node waits, cordoned and
	// empty, before it is deleted (a rollback can still uncordon it);
	// default 0s.
	//
	// +optional
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('30m')",message="nodeSoakDuration must be a duration from 0s to 30m"
	NodeSoakDuration *metav1.Duration `json:"nodeSoakDuration,omitempty"`

	// UndrainableNodeBehavior is what happens to a node still not empty
	// after DrainTimeout. Schedule (the default) puts it back into service
	// on its old image, labelled sluice.dev/upgrade-status=Blocked, deletes
	// its surge node, and goes on: the upgrade ends Failed. Cordon leaves it
	// cordoned, labelled sluice.dev/upgrade-status=Quarantined, keeps its
	// surge node, and goes on: the upgrade fails once more than
	// MaxBlockedNodes are quarantined.
	//
	// +optional
	// +kubebuilder:default=Schedule
	UndrainableNodeBehavior UndrainableNodeBehavior `json:"undrainableNodeBehavior,omitempty"`

	// MaxBlockedNodes is how many nodes may be quarantined (with
	// UndrainableNodeBehavior Cordon), or have surge nodes that failed the
	// health gate, before the upgrade fails; default the surge count.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxBlockedNodes *int32 `json:"maxBlockedNodes,omitempty"`

	// HealthGate adds conditions a new node must meet before the old nodes
	// it stands in for are drained, beside Ready and its startup taints
	// lifted.
	//
	// +optional
	HealthGate *HealthGate `json:"healthGate,omitempty"`
}

// HealthGate is what "healthy" means for a new node.
type HealthGate struct {
	// DaemonSetPodsReady waits until every DaemonSet pod on the new node is
	// Ready (a CNI, a log shipper, a node agent).
	//
	// +optional
	DaemonSetPodsReady bool `json:"daemonSetPodsReady,omitempty"`
}

// UndrainableNodeBehavior is what an upgrade does with a node that did not
// drain within its timeout.
//
// +kubebuilder:validation:Enum=Schedule;Cordon
type UndrainableNodeBehavior string

// Undrainable node behaviors.
const (
	UndrainableSchedule UndrainableNodeBehavior = "Schedule"
	UndrainableCordon   UndrainableNodeBehavior = "Cordon"
)

// ProviderName names what creates and deletes a pool's machines.
//
// +kubebuilder:validation:Enum=kwok;none;aws-asg;azure-vmss;aks-agentpool;gcp-mig;cluster-api
type ProviderName string

// Providers.
const (
	ProviderKwok       ProviderName = "kwok"
	ProviderNone       ProviderName = "none"
	ProviderAWSASG     ProviderName = "aws-asg"
	ProviderAzureVMSS  ProviderName = "azure-vmss"
	ProviderAKS        ProviderName = "aks-agentpool"
	ProviderGCPMIG     ProviderName = "gcp-mig"
	ProviderClusterAPI ProviderName = "cluster-api"
)

// ProviderSpec picks the pool's provider and holds its settings.
//
// +kubebuilder:validation:XValidation:rule="!has(self.kwok) || self.name == 'kwok'",message="provider.kwok is the kwok provider's settings: set it only with provider.name kwok"
// +kubebuilder:validation:XValidation:rule="!has(self.aws) || self.name == 'aws-asg'",message="provider.aws is the aws-asg provider's settings: set it only with provider.name aws-asg"
// +kubebuilder:validation:XValidation:rule="self.name != 'aws-asg' || has(self.aws)",message="provider.name aws-asg needs provider.aws.autoScalingGroups: the groups the pool's machines belong to"
// +kubebuilder:validation:XValidation:rule="!has(self.azure) || self.name == 'azure-vmss'",message="provider.azure is the azure-vmss provider's settings: set it only with provider.name azure-vmss"
// +kubebuilder:validation:XValidation:rule="self.name != 'azure-vmss' || has(self.azure)",message="provider.name azure-vmss needs provider.azure: the subscription, resource group and scale sets the pool's machines belong to"
// +kubebuilder:validation:XValidation:rule="!has(self.aks) || self.name == 'aks-agentpool'",message="provider.aks is the aks-agentpool provider's settings: set it only with provider.name aks-agentpool"
// +kubebuilder:validation:XValidation:rule="self.name != 'aks-agentpool' || has(self.aks)",message="provider.name aks-agentpool needs provider.aks: the subscription, resource group, cluster and agent pool the pool's machines belong to"
// +kubebuilder:validation:XValidation:rule="!has(self.gcp) || self.name == 'gcp-mig'",message="provider.gcp is the gcp-mig provider's settings: set it only with provider.name gcp-mig"
// +kubebuilder:validation:XValidation:rule="self.name != 'gcp-mig' || has(self.gcp)",message="provider.name gcp-mig needs provider.gcp: the project and managed instance groups the pool's machines belong to"
// +kubebuilder:validation:XValidation:rule="!has(self.clusterAPI) || self.name == 'cluster-api'",message="provider.clusterAPI is the cluster-api provider's settings: set it only with provider.name cluster-api"
// +kubebuilder:validation:XValidation:rule="self.name != 'cluster-api' || has(self.clusterAPI)",message="provider.name cluster-api needs provider.clusterAPI: the namespace and MachineDeployment (or MachineSet) the pool's machines belong to"
type ProviderSpec struct {
	// Name is the provider: kwok, aws-asg, azure-vmss, aks-agentpool,
	// gcp-mig, cluster-api or none.
	//
	// +optional
	// +kubebuilder:default=none
	Name ProviderName `json:"name,omitempty"`

	// Kwok holds the settings of the kwok provider, the sandbox's simulated
	// cloud.
	//
	// +optional
	Kwok *KwokProviderSpec `json:"kwok,omitempty"`

	// AWS holds the settings of the aws-asg provider: the Auto Scaling
	// groups the pool's machines belong to. The region and credentials are
	// the controller's (the AWS SDK's default chain).
	//
	// +optional
	AWS *AWSProviderSpec `json:"aws,omitempty"`

	// Azure holds the settings of the azure-vmss provider: the VM scale
	// sets the pool's machines belong to. Credentials are the controller's
	// (azidentity's default chain: workload identity in a cluster).
	//
	// +optional
	Azure *AzureProviderSpec `json:"azure,omitempty"`

	// AKS holds the settings of the aks-agentpool provider: the AKS agent
	// pool the pool's machines belong to, changed through the AKS API.
	// Credentials are the controller's (azidentity's default chain).
	//
	// +optional
	AKS *AKSProviderSpec `json:"aks,omitempty"`

	// GCP holds the settings of the gcp-mig provider: the Compute Engine
	// managed instance groups the pool's machines belong to. Credentials
	// are the controller's (Application Default Credentials).
	//
	// +optional
	GCP *GCPProviderSpec `json:"gcp,omitempty"`

	// ClusterAPI holds the settings of the cluster-api provider: the
	// Cluster API MachineDeployment (or standalone MachineSet) the pool's
	// machines belong to. sluice also drains the Machines Cluster API
	// deletes there, through a pre-drain hook (docs/providers.md).
	//
	// +optional
	ClusterAPI *ClusterAPIProviderSpec `json:"clusterAPI,omitempty"`
}

// ClusterAPIProviderSpec maps a pool onto one MachineDeployment or one
// standalone MachineSet of Cluster API.
//
// +kubebuilder:validation:XValidation:rule="has(self.machineDeployment) != has(self.machineSet)",message="provider.clusterAPI needs exactly one of machineDeployment and machineSet"
type ClusterAPIProviderSpec struct {
	// Namespace of the MachineDeployment or MachineSet (and its Machines).
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// MachineDeployment is the name of the MachineDeployment whose
	// Machines are the pool's.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	MachineDeployment string `json:"machineDeployment,omitempty"`

	// MachineSet is the name of a standalone MachineSet (one no
	// MachineDeployment owns) whose Machines are the pool's.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	MachineSet string `json:"machineSet,omitempty"`
}

// AKSProviderSpec maps a pool onto one agent pool of an AKS cluster.
type AKSProviderSpec struct {
	// SubscriptionID of the cluster.
	//
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	SubscriptionID string `json:"subscriptionID"`

	// ResourceGroup of the managed cluster (the cluster's own, not its
	// node resource group MC_...).
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=90
	ResourceGroup string `json:"resourceGroup"`

	// Cluster is the managed cluster's name.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`

	// AgentPool is the agent pool's name (az aks nodepool list). sluice
	// must be its only writer of count: no cluster autoscaler on it.
	//
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9]{0,11}$`
	AgentPool string `json:"agentPool"`
}

// GCPProviderSpec maps a pool onto Compute Engine managed instance groups
// that no GKE node pool owns.
type GCPProviderSpec struct {
	// Project of the groups.
	//
	// +kubebuilder:validation:Pattern=`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`
	Project string `json:"project"`

	// InstanceGroups the pool's machines belong to: one regional group,
	// or zonal groups (one per zone or machine type). A new machine goes to
	// the first group whose machine type the template allows and whose zone
	// has capacity.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	InstanceGroups []InstanceGroup `json:"instanceGroups"`
}

// InstanceGroup is one managed instance group of a pool: zonal (zone) or
// regional (region).
//
// +kubebuilder:validation:XValidation:rule="has(self.zone) != has(self.region)",message="an instance group is zonal or regional: set zone or region, not both"
type InstanceGroup struct {
	// Name of the group.
	//
	// +kubebuilder:validation:Pattern=`^[a-z][-a-z0-9]{0,61}[a-z0-9]?$`
	Name string `json:"name"`

	// Zone of a zonal group, such as europe-west1-b.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`

	// Region of a regional group, such as europe-west1.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`
}

// AzureProviderSpec maps a pool onto Azure VM scale sets (an AKS node pool
// is one, in the cluster's node resource group, MC_...).
type AzureProviderSpec struct {
	// SubscriptionID of the scale sets.
	//
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	SubscriptionID string `json:"subscriptionID"`

	// ResourceGroup of the scale sets.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=90
	ResourceGroup string `json:"resourceGroup"`

	// ScaleSets the pool's machines belong to: one, or one per VM size. A
	// new machine goes to the first set whose VM size the template allows
	// and the cloud has capacity for. sluice must be the only writer of
	// their capacity (no cluster autoscaler on them).
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	ScaleSets []ScaleSet `json:"scaleSets"`
}

// ScaleSet is one Azure VM scale set of a pool.
type ScaleSet struct {
	// Name of the scale set.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
}

// AWSProviderSpec maps a pool onto EC2 Auto Scaling groups.
type AWSProviderSpec struct {
	// AutoScalingGroups the pool's machines belong to: one, or one per
	// instance type. A new machine goes to the first group whose instance
	// type the template allows and the cloud has capacity for.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	AutoScalingGroups []AutoScalingGroup `json:"autoScalingGroups"`
}

// AutoScalingGroup is one EC2 Auto Scaling group of a pool.
type AutoScalingGroup struct {
	// Name of the group.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`

	// InstanceType of the group's machines, overriding its launch
	// template's; empty: the launch template's.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=64
	InstanceType string `json:"instanceType,omitempty"`
}

// Manages says whether sluice creates and deletes the pool's machines.
func (p ProviderSpec) Manages() bool { return p.Name != "" && p.Name != ProviderNone }

// NameOrNone is the provider's name, ProviderNone when the pool names none.
func (p ProviderSpec) NameOrNone() ProviderName {
	if p.Name == "" {
		return ProviderNone
	}
	return p.Name
}

// KwokProviderSpec makes the sandbox's simulated cloud behave like a real
// one: machines take time to boot, and can fail the ways clouds fail.
type KwokProviderSpec struct {
	// BootDelay is how long a new machine takes before its Node registers,
	// from 0s to 10m.
	//
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('10m')",message="bootDelay must be a duration from 0s to 10m, such as 5s"
	BootDelay *metav1.Duration `json:"bootDelay,omitempty"`

	// Failure makes the simulated cloud fail each new machine:
	// InsufficientCapacity and QuotaExceeded refuse it the way a cloud's API
	// does; Throttled refuses it as a throttled API does, asking to be
	// retried after 20 s; NeverJoins accepts it, but its Node never
	// registers.
	//
	// +optional
	// +kubebuilder:default=None
	Failure KwokFailure `json:"failure,omitempty"`
}

// KwokFailure is how the kwok provider fails new machines.
//
// +kubebuilder:validation:Enum=None;InsufficientCapacity;QuotaExceeded;Throttled;NeverJoins
type KwokFailure string

// Kwok failure modes.
const (
	KwokFailureNone                 KwokFailure = "None"
	KwokFailureInsufficientCapacity KwokFailure = "InsufficientCapacity"
	KwokFailureQuotaExceeded        KwokFailure = "QuotaExceeded"
	KwokFailureThrottled            KwokFailure = "Throttled"
	KwokFailureNeverJoins           KwokFailure = "NeverJoins"
)

// DefaultKwokBootDelay is KwokProviderSpec.BootDelay's default.
const DefaultKwokBootDelay = 5 * time.Second

// NodeTemplate is the node a pool's nodes should be. The provider makes new
// machines from it; a node that differs from it has drifted.
type NodeTemplate struct {
	// Labels every node carries.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="!('sluice.dev/nodepool' in self) && !('sluice.dev/capacity-type' in self)",message="template.labels must not set sluice.dev/nodepool or sluice.dev/capacity-type: the provider writes those itself (set template.capacity for the second)"
	Labels map[string]string `json:"labels,omitempty"`

	// Taints every node carries.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are on a node when it registers, and removed by
	// something else once the node is ready for work (a CNI, a node agent);
	// drift never looks at them.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=50
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// InstanceTypes the provider may make, the first it has capacity for
	// (for example Standard_D4s_v5, m6i.xlarge). A node of another type has
	// drifted.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	InstanceTypes []string `json:"instanceTypes,omitempty"`

	// Capacity is spot or on-demand (the default).
	//
	// +optional
	// +kubebuilder:default=on-demand
	Capacity CapacityType `json:"capacity,omitempty"`

	// Image is the node image (an AKS node image version, an AMI). A node
	// on another image has drifted: changing it rolls the pool.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Image string `json:"image,omitempty"`

	// Kubelet settings the provider applies.
	//
	// +optional
	Kubelet *KubeletSpec `json:"kubelet,omitempty"`
}

// CapacityType is how a machine is bought.
//
// +kubebuilder:validation:Enum=on-demand;spot
type CapacityType string

// Capacity types.
const (
	CapacityOnDemand CapacityType = "on-demand"
	CapacitySpot     CapacityType = "spot"
)

// KubeletSpec holds the kubelet settings a provider applies to new nodes.
type KubeletSpec struct {
	// MaxPods is how many pods a node may run, from 1 to 1000.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxPods *int32 `json:"maxPods,omitempty"`
}

// DisruptionSpec says when sluice may disrupt a pool's nodes of its own
// accord, and how many at once.
type DisruptionSpec struct {
	// ExpireAfter is how old a node may grow before it is replaced: a
	// duration such as 720h, or Never (the default).
	//
	// +optional
	// +kubebuilder:default=Never
	// +kubebuilder:validation:Pattern=`^(Never|([0-9]+(\.[0-9]+)?(s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'Never' || duration(self) >= duration('1m')",message="expireAfter must be Never or a duration of at least 1m, such as 720h"
	ExpireAfter string `json:"expireAfter,omitempty"`

	// TerminationGracePeriod is how long a node being taken away may drain:
	// once it has passed, the pods still on the node are deleted (a
	// PodDisruptionBudget no longer holds them) so the node finishes. Unset,
	// a drain waits as long as its pods' budgets make it.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="terminationGracePeriod must be a duration such as 48h"
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`

	// ConsolidationPolicy says which nodes consolidation may remove or
	// replace: only empty ones, or underutilized ones too.
	//
	// +optional
	// +kubebuilder:default=WhenEmptyOrUnderutilized
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// ConsolidateAfter is how long a node must go without pods arriving or
	// leaving before consolidation considers it: a duration, or Never.
	//
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^(Never|([0-9]+(\.[0-9]+)?(s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	ConsolidateAfter string `json:"consolidateAfter,omitempty"`

	// Consolidation tunes when a cheaper arrangement is worth a change.
	//
	// +optional
	Consolidation *ConsolidationSpec `json:"consolidation,omitempty"`

	// Budgets cap how many of the pool's nodes may be disrupting at once;
	// the most restrictive budget active now wins. Nodes being disrupted for
	// any reason count, maintenance and a person's drain included, and so do
	// NotReady nodes. Default one budget of 10%.
	//
	// +optional
	// +kubebuilder:default={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	Budgets []Budget `json:"budgets,omitempty"`

	// Paused stops every voluntary disruption of the pool (expiry, drift,
	// consolidation, upgrades); maintenance events are still handled.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ConsolidationSpec tunes consolidation (docs/consolidation.md).
type ConsolidationSpec struct {
	// MinSavings is how much less per hour a replacement must cost than
	// the nodes it replaces, as a percentage of their price, so that a
	// node is not replaced for a cent; default 10%. Removing a node
	// without a replacement always saves its whole price.
	//
	// +optional
	// +kubebuilder:default="10%"
	// +kubebuilder:validation:Pattern=`^(100|[0-9]{1,2})%$`
	// +kubebuilder:validation:MaxLength=4
	MinSavings string `json:"minSavings,omitempty"`

	// UtilizationThreshold, when set, is a simple rule on top: only a node
	// whose cpu and memory requests are both below this share of its
	// allocatable is considered underutilized.
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^(100|[0-9]{1,2})%$`
	// +kubebuilder:validation:MaxLength=4
	UtilizationThreshold *string `json:"utilizationThreshold,omitempty"`

	// SpotToSpot lets a spot node be replaced by a cheaper spot node. Off
	// by default: a spot price moves, and chasing it churns. An on-demand
	// node is only ever replaced with the template's capacity type.
	//
	// +optional
	SpotToSpot bool `json:"spotToSpot,omitempty"`
}

// ConsolidationPolicy says which nodes consolidation considers.
//
// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidateWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidateWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
)

// Never is the value of ExpireAfter and ConsolidateAfter that turns them off.
const Never = "Never"

// Budget caps the nodes of a pool disrupting at once, for some reasons, at
// some times.
//
// +kubebuilder:validation:XValidation:rule="has(self.schedule) == has(self.duration)",message="a budget's schedule and duration come together: the schedule says when the budget's window opens, the duration how long it stays open"
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || has(self.schedule)",message="a budget's timeZone applies to its schedule: set a schedule too"
type Budget struct {
	// Nodes is how many nodes may be disrupting at once: a number, or a
	// percentage of the pool's nodes (rounded up), from 0% to 100%.
	//
	// +required
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:validation:MaxLength=10
	Nodes string `json:"nodes"`

	// Reasons the budget applies to; left out, it applies to all.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=7
	// +listType=set
	Reasons []DisruptionReason `json:"reasons,omitempty"`

	// Schedule is a cron expression (five fields, or a macro such as
	// @daily) for when the budget's window opens; left out, the budget is
	// always active.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5 || self.startsWith('@')",message="schedule must be a cron expression of five fields (minute hour day-of-month month day-of-week), such as '0 9 * * mon-fri', or a macro such as @daily"
	Schedule *string `json:"schedule,omitempty"`

	// TimeZone is the IANA time zone the schedule is read in, such as
	// Europe/Berlin; default UTC.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone *string `json:"timeZone,omitempty"`

	// Duration is how long the window stays open after the schedule fires.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="a budget's duration must be at least 1m, such as 8h"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// DisruptionReason is why sluice disrupts a node of its own accord.
//
// +kubebuilder:validation:Enum=Empty;Underutilized;Drifted;Expired;Upgrade;Unhealthy;RebootRequired
type DisruptionReason string

// Disruption reasons.
const (
	ReasonEmpty         DisruptionReason = "Empty"
	ReasonUnderutilized DisruptionReason = "Underutilized"
	ReasonDrifted       DisruptionReason = "Drifted"
	ReasonExpired       DisruptionReason = "Expired"
	ReasonUpgrade       DisruptionReason = "Upgrade"
	// ReasonUnhealthy is a repair's: it counts against the budgets but
	// is never held by them (only by spec.repair.maxUnhealthy).
	ReasonUnhealthy DisruptionReason = "Unhealthy"
	// ReasonRebootRequired is a reboot the node's OS asked for (not the
	// cloud's maintenance Reboot event, which is involuntary).
	ReasonRebootRequired DisruptionReason = "RebootRequired"
)

// DisruptionReasons lists every reason, in the order sluice reports them.
var DisruptionReasons = []DisruptionReason{ReasonEmpty, ReasonUnderutilized, ReasonDrifted, ReasonExpired, ReasonUpgrade, ReasonUnhealthy, ReasonRebootRequired}

// Limits cap what a pool's provider may create.
type Limits struct {
	// CPU caps the pool's total CPU capacity.
	//
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory caps the pool's total memory capacity.
	//
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Nodes caps the pool's node count.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Nodes *int32 `json:"nodes,omitempty"`
}

// Defaults of MaintenanceSpec's fields. The CRD schema repeats them as
// defaults the API server applies (a test checks that the two agree).
const (
	DefaultApproveEarly   = true
	DefaultDeadlineMargin = 5 * time.Second
	DefaultOnDeadline     = OnDeadlineDelete
	DefaultUserInitiated  = UserInitiatedLikePlatform
)

// MaintenanceSpec is a pool's answer to maintenance events.
type MaintenanceSpec struct {
	// Actions overrides the action taken per event type; an event type left
	// out takes its default: Redeploy, Preempt and Terminate drain the node,
	// Rebalance cordons it, Freeze, Reboot and Maintenance do nothing.
	//
	// +optional
	Actions MaintenanceActions `json:"actions,omitempty"`

	// ApproveEarly tells the cloud it may start the maintenance as soon as
	// the node is drained, instead of waiting for the event's deadline.
	//
	// +optional
	// +kubebuilder:default=true
	ApproveEarly *bool `json:"approveEarly,omitempty"`

	// DeadlineMargin is how long before the event's deadline the drain must
	// be finished, between 0s and 10m.
	//
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('10m')",message="deadlineMargin must be a duration from 0s to 10m, such as 5s or 1m30s: it is how long before the event's deadline the drain must be finished"
	DeadlineMargin *metav1.Duration `json:"deadlineMargin,omitempty"`

	// OnDeadline says what happens to the pods still on the node when the
	// deadline, less DeadlineMargin, comes and a PodDisruptionBudget still
	// holds them. Delete deletes them with the grace period left, because the
	// machine goes anyway; Stop leaves them for the cloud to take with the
	// machine, and reports them.
	//
	// +optional
	// +kubebuilder:default=Delete
	OnDeadline OnDeadlineAction `json:"onDeadline,omitempty"`

	// ForceEvict says when a maintenance drain also evicts pods a plain drain
	// refuses: pods no controller recreates, and pods whose emptyDir data is
	// lost when they leave. WhenNodeGoesAway (the default) does so for
	// Preempt and Terminate only, where those pods and their data are lost
	// with the machine anyway and a graceful exit beats a hard kill; Always
	// does so for every event that drains; Never leaves them, and the drain
	// reports them as blockers.
	//
	// +optional
	// +kubebuilder:default=WhenNodeGoesAway
	ForceEvict ForceEvictPolicy `json:"forceEvict,omitempty"`

	// UserInitiated says what happens on an event the VM's owner asked for
	// rather than the platform (Azure's EventSource User: a restart or
	// redeploy from the portal, the API, or a tool acting for the owner).
	// LikePlatform (the default) treats it as any other event of its type.
	// Approve tells the platform at once that it may start, and does nothing
	// else to the node: whoever asked for the event has prepared the node
	// for it, and would otherwise wait out its NotBefore for nothing.
	//
	// +optional
	// +kubebuilder:default=LikePlatform
	UserInitiated UserInitiatedPolicy `json:"userInitiated,omitempty"`
}

// UserInitiatedPolicy says how a pool answers events its VMs' owner asked
// for.
//
// +kubebuilder:validation:Enum=LikePlatform;Approve
type UserInitiatedPolicy string

// User-initiated event policies.
const (
	UserInitiatedLikePlatform UserInitiatedPolicy = "LikePlatform"
	UserInitiatedApprove      UserInitiatedPolicy = "Approve"
)

// ApproveUserInitiated says whether an event the VM's owner asked for is
// approved at once and otherwise left alone; nil receivers answer with the
// default.
func (m *MaintenanceSpec) ApproveUserInitiated() bool {
	return m != nil && m.UserInitiated == UserInitiatedApprove
}

// ForceEvictPolicy says when maintenance drains evict unreplicated pods and
// pods with emptyDir data.
//
// +kubebuilder:validation:Enum=WhenNodeGoesAway;Always;Never
type ForceEvictPolicy string

// Force-evict policies.
const (
	ForceEvictWhenNodeGoesAway ForceEvictPolicy = "WhenNodeGoesAway"
	ForceEvictAlways           ForceEvictPolicy = "Always"
	ForceEvictNever            ForceEvictPolicy = "Never"
)

// DefaultForceEvict is ForceEvict's default.
const DefaultForceEvict = ForceEvictWhenNodeGoesAway

// ApproveEarlyOrDefault returns ApproveEarly, or its default when unset.
func (m *MaintenanceSpec) ApproveEarlyOrDefault() bool {
	if m == nil || m.ApproveEarly == nil {
		return DefaultApproveEarly
	}
	return *m.ApproveEarly
}

// DeadlineMarginOrDefault returns DeadlineMargin, or its default when unset.
func (m *MaintenanceSpec) DeadlineMarginOrDefault() time.Duration {
	if m == nil || m.DeadlineMargin == nil {
		return DefaultDeadlineMargin
	}
	return m.DeadlineMargin.Duration
}

// OnDeadlineOrDefault returns OnDeadline, or its default when unset.
func (m *MaintenanceSpec) OnDeadlineOrDefault() OnDeadlineAction {
	if m == nil || m.OnDeadline == "" {
		return DefaultOnDeadline
	}
	return m.OnDeadline
}

// MaintenanceActions sets the action per maintenance event type; the field
// names are the event types. An unset field takes the type's default (see
// internal/nodepool.ActionFor).
type MaintenanceActions struct {
	// Freeze: the VM is paused for a few seconds (Azure), or live-migrated
	// (GCP). None (the default) evicts only the pods that opted in to
	// leaving on a freeze (labelled sluice.dev/evict-on-freeze=true, or
	// remediator.kubernetes.azure.com/onFreeze as AKS uses), cordoning the
	// node meanwhile, and leaves the rest; Drain drains the whole node.
	// Cordon alone would keep new pods away from a node that is back within
	// seconds, so it is refused.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'Cordon'",message="Freeze may be None or Drain: a freeze pauses the VM for seconds, so a cordon alone would only keep new pods off a node that is back at once; None evicts just the pods labelled to leave on a freeze, Drain drains the whole node"
	Freeze MaintenanceAction `json:"Freeze,omitempty"`

	// Reboot: the VM restarts and comes back. Default None.
	//
	// +optional
	Reboot MaintenanceAction `json:"Reboot,omitempty"`

	// Redeploy: the VM moves to another host and loses its local disks.
	// Default Drain.
	//
	// +optional
	Redeploy MaintenanceAction `json:"Redeploy,omitempty"`

	// Preempt: spot capacity is reclaimed, with 30 s to 2 min of notice.
	// Default Drain, finished before the deadline.
	//
	// +optional
	Preempt MaintenanceAction `json:"Preempt,omitempty"`

	// Terminate: the VM is deleted or retired. Default Drain.
	//
	// +optional
	Terminate MaintenanceAction `json:"Terminate,omitempty"`

	// Rebalance: the cloud recommends moving off a spot instance at
	// elevated risk of preemption (AWS). None or Cordon (the default); Drain
	// is refused, because a recommendation may never turn into a
	// preemption, and a Preempt notice that follows is drained anyway.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'Drain'",message="Rebalance may be None or Cordon: a rebalance recommendation is only a hint that a spot instance may be preempted, so draining on it is refused; the Preempt notice that may follow is drained"
	Rebalance MaintenanceAction `json:"Rebalance,omitempty"`

	// Maintenance: host maintenance the VM lives through (GCP). Default None.
	//
	// +optional
	Maintenance MaintenanceAction `json:"Maintenance,omitempty"`
}

// MaintenanceAction is what sluice does to a node on a maintenance event.
//
// +kubebuilder:validation:Enum=None;Cordon;Drain
type MaintenanceAction string

// Maintenance actions.
const (
	// ActionNone leaves the node alone.
	ActionNone MaintenanceAction = "None"
	// ActionCordon marks the node unschedulable and moves nothing.
	ActionCordon MaintenanceAction = "Cordon"
	// ActionDrain cordons the node and evicts its pods, respecting their
	// PodDisruptionBudgets, before the event's deadline.
	ActionDrain MaintenanceAction = "Drain"
)

// OnDeadlineAction is what happens to pods a budget still holds on a node
// when the maintenance deadline comes.
//
// +kubebuilder:validation:Enum=Delete;Stop
type OnDeadlineAction string

// Deadline actions.
const (
	// OnDeadlineDelete deletes the remaining pods with the grace period
	// left, bypassing their budgets: the machine goes anyway.
	OnDeadlineDelete OnDeadlineAction = "Delete"
	// OnDeadlineStop stops draining and leaves the remaining pods to go
	// with the machine, reporting them.
	OnDeadlineStop OnDeadlineAction = "Stop"
)

// NodePoolStatus is what sluice last observed of the pool.
type NodePoolStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes is how many nodes the pool selects.
	//
	// +optional
	Nodes int32 `json:"nodes"`

	// Resources are the pool's nodes' capacity, summed.
	//
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// Disrupting is how many of the pool's nodes are out of service now,
	// for any reason: cordoned, being deleted, NotReady, or being replaced.
	//
	// +optional
	Disrupting int32 `json:"disrupting"`

	// Drifted is how many of the pool's nodes differ from its template.
	//
	// +optional
	Drifted int32 `json:"drifted"`

	// Expired is how many of the pool's nodes are older than expireAfter.
	//
	// +optional
	Expired int32 `json:"expired"`

	// Allowed is, per reason, how many more nodes may be disrupted now.
	//
	// +optional
	// +listType=map
	// +listMapKey=reason
	Allowed []AllowedDisruptions `json:"allowed,omitempty"`

	// NextBudgetChange is when the budgets in force next change (a
	// scheduled window opens or closes); unset when none is scheduled.
	//
	// +optional
	NextBudgetChange *metav1.Time `json:"nextBudgetChange,omitempty"`

	// Upgrade is the pool's image upgrade as its nodes show it; unset
	// when every node is on the template's image and none ever was not.
	//
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`

	// Conditions are the pool's latest observations.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// UpgradePhase is where a pool's upgrade stands.
//
// +kubebuilder:validation:Enum=Progressing;Paused;Aborted;Succeeded;Failed
type UpgradePhase string

// Upgrade phases.
const (
	UpgradeProgressing UpgradePhase = "Progressing"
	UpgradePaused      UpgradePhase = "Paused"
	UpgradeAborted     UpgradePhase = "Aborted"
	UpgradeSucceeded   UpgradePhase = "Succeeded"
	UpgradeFailed      UpgradePhase = "Failed"
)

// UpgradeStatus is a pool's upgrade as the controller last saw it.
type UpgradeStatus struct {
	Phase UpgradePhase `json:"phase"`
	// Image is the image the pool is upgrading to.
	Image string `json:"image"`
	// Nodes is how many of the pool's nodes the upgrade concerns (surge
	// nodes not counted); Upgraded how many of them run Image.
	Nodes    int32 `json:"nodes"`
	Upgraded int32 `json:"upgraded"`
	// InFlight is how many old nodes are being replaced now.
	InFlight int32 `json:"inFlight"`
	// Batch is the batch under way (1-based) of Batches.
	Batch   int32 `json:"batch"`
	Batches int32 `json:"batches"`
	// Step says what the upgrade waits for now.
	//
	// +optional
	Step string `json:"step,omitempty"`
	// StartedAt is when the controller first saw this upgrade.
	//
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when it ended (Succeeded or Failed).
	//
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// ETA is when the upgrade is expected to end.
	//
	// +optional
	ETA *metav1.Time `json:"eta,omitempty"`
	// Blocked nodes did not drain in time and were put back (Schedule);
	// Quarantined ones are left cordoned (Cordon).
	//
	// +optional
	Blocked []string `json:"blocked,omitempty"`
	// +optional
	Quarantined []string `json:"quarantined,omitempty"`
	// Message says why the upgrade is Failed, Paused or Aborted.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// AllowedDisruptions is how many more of a pool's nodes may be disrupted now
// for one reason.
type AllowedDisruptions struct {
	Reason DisruptionReason `json:"reason"`
	Nodes  int32            `json:"nodes"`
}
