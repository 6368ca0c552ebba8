//go:build tools

// Package tools pins krew and its manifest validator, with which the
// plugin's test installs sluice as `kubectl sluice` (test/plugin);
// hack/tools/gotool.sh builds them.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
