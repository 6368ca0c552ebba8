package sandbox

import _ "embed" // the kwok configuration ships inside the binary

// Annotations that steer the sandbox's simulated kubelets (kwok.yaml).
const (
	// AnnotationExitAfterSeconds on a pod: after deletion its process exits
	// this many seconds later (or when the grace period ends, if sooner),
	// instead of using the whole terminationGracePeriodSeconds.
	AnnotationExitAfterSeconds = "sandbox.sluice.dev/exit-after-seconds"
	// AnnotationReadyAfterSeconds on a pod: like a pod whose readiness probe
	// passes only after a while, it is Running with Ready=False (its
	// containers started) as soon as it is bound to a node, and Ready this
	// many seconds later, instead of Running and Ready at once.
	AnnotationReadyAfterSeconds = "sandbox.sluice.dev/ready-after-seconds"
	// AnnotationCompleteAfterSeconds on a pod: it succeeds this many seconds
	// after it starts running.
	AnnotationCompleteAfterSeconds = "sandbox.sluice.dev/complete-after-seconds"
	// AnnotationNotReady on a node: its kubelet reports NotReady while the
	// annotation is present, and Ready again once it is removed.
	AnnotationNotReady = "sandbox.sluice.dev/not-ready"
)

//go:embed kwok.yaml
var kwokConfig []byte
