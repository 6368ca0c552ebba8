// Package providertest is the conformance suite every provider.Provider must
// pass against its emulator or fake: what the Provider interface promises
// (a Create asked again by name makes no second machine, a Delete asked
// again is no error, List answers for sluice's machines of one pool only, a
// lost answer neither leaks nor doubles a machine), what the rest of sluice
// reads from a provider (its refusals' codes and whether they are
// retryable, the unregistered taint a new machine's kubelet registers
// with, the image a template asks for), and, for a provider.Rebooter, a
// reboot that restarts the machine in place, written once so that the
// providers cannot drift apart.
//
// A provider's own tests call Run with a Harness: how to make a fresh cloud
// with a pool in it, and the hooks that make that cloud do what the suite
// needs (refuse the next create as the vendor documents, lose an answer,
// make a machine sluice did not ask for). A harness that cannot show a
// behaviour says why, and the subtest is skipped with that reason.
package providertest
