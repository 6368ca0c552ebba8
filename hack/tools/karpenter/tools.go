//go:build tools

// Package tools pins Karpenter's kwok provider, the peer the consolidation
// benchmark runs beside sluice. It is never compiled into sluice;
// hack/tools/karpenter.sh builds the command. It has its own module so that
// Karpenter's dependencies never move the control plane's.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
