// Package registration gives each new Node of a pool its pool's template
// before any pod lands on it. A provider's machine registers with the
// NoExecute taint contract.TaintUnregistered (set in what the provider
// launches); the controller here applies the pool's template labels, taints
// and startup taints, notes what it applied and the image the cloud reports,
// and removes the taint, in one patch. A cloud builds a Node from its launch
// template or scale-set model, which knows nothing of the pool: without this
// step a label added to a pool's template would make every replacement
// drifted as it joins. docs/design/registration.md says why it works this way.
package registration
