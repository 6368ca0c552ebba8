// Package kwok is the sandbox's cloud: a provider.Provider whose machines are
// Nodes that kwok (started with --manage-all-nodes) plays. It behaves like a
// cloud where a test needs it to: a new machine takes the pool's bootDelay
// before its Node registers, with the capacity of a real instance type
// (package catalog), and the pool's kwok.failure makes it refuse machines
// the way Azure and AWS do, or accept one that never joins.
//
// The provider lives inside the controller's process. Machines whose Node
// has not registered (Launching, or Failed) are held in memory under a mutex;
// once its Node is created the Node is the machine's only record, labelled
// sluice.dev/nodepool and with a kwok:// provider ID, so a restarted
// controller finds its running machines again from the Nodes, and a Node
// deleted behind the provider's back (the sandbox's simulated preemption)
// takes its machine with it, as a preempted VM is gone. A restarted
// controller forgets the machines that were still booting, and they never
// register: a cloud's API would NOT do that, and code that relies on the
// provider across a restart must treat a machine it named and cannot find as
// gone.
//
// Nodes register only while Run is running: Create schedules the
// registration, Run carries it out when the boot delay has passed on the
// provider's clock, until its context ends.
package kwok
