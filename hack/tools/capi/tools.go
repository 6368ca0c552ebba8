//go:build tools

// Package tools pins Cluster API's core controllers, which test/capi runs
// against the sandbox's API server. It is never compiled into sluice;
// hack/tools/capi.sh builds the command. It has its own module because
// Cluster API v1.14 needs k8s.io modules newer than the control plane's pins.
package tools

import (
	_ "sigs.k8s.io/cluster-api/core"
)
