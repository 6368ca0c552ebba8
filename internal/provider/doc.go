// Package provider is how sluice makes and removes the machines of a NodePool
// whose spec.provider names a provider: the Provider interface a cloud (or the
// sandbox's kwok) implements, the Machine it reports, the Error it refuses
// with, and the labels and annotations every provider writes on the Nodes it
// makes, which drift detection reads back.
//
// A Provider answers for machines, not Nodes: a machine exists from the moment
// the cloud accepts it, long before its Node registers, and may never register
// at all. The disruption controller waits on the Node; it asks the provider
// only to create, look up and delete machines.
package provider
