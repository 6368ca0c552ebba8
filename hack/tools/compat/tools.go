//go:build tools

// Package compat pins the oldest Kubernetes minor sluice supports. It is never
// compiled into sluice; hack/tools/build.sh compat builds each listed command
// (etcd and kwok come from the main build: see build.sh).
package compat

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
