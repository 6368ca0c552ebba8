// Package v1alpha1 holds the sluice.dev/v1alpha1 API: the cluster-scoped
// NodePool, which says what sluice may do to a group of nodes. The deepcopy
// functions and the CRD the Helm chart ships (charts/sluice/crds) are
// generated from these types by `make generate`; validation lives in the
// schema as CEL so bad input is refused at `kubectl apply`.
//
// +kubebuilder:object:generate=true
// +groupName=sluice.dev
package v1alpha1
