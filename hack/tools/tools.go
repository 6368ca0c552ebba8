//go:build tools

// Package tools pins the control-plane programs sluice's sandbox runs. It is
// never compiled into sluice; hack/tools/build.sh builds each listed command.
// kwok is not listed: it builds from its own module graph (see build.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
