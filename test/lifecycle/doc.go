// Package lifecycle tests what happens to sluice after its first install, on
// the sandbox, as a platform team runs it: `helm upgrade` to this version and
// `helm rollback` to the last release while sluice is in the middle of a
// drift and a maintenance drain (docs/operations.md).
//
// kwok runs no container, so the tests play the kubelet of the controller's
// Deployment (standIn): they run the binary its pod template's image names,
// with the template's arguments, as the chart's service account, and replace
// it as a rolling update would when the template changes.
package lifecycle
