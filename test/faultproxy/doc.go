// Package faultproxy is a reverse proxy for chaos tests: it sits on loopback in
// front of kube-apiserver and, driven by a seed, answers some requests with the
// failures a loaded API server really produces (429 with Retry-After, 5xx,
// answers lost after a write was applied, watch streams that end early, added
// latency), so a test can check that sluice's controllers converge anyway.
//
// Clients talk plain HTTP to the proxy and send their own bearer token, which
// the proxy passes on unchanged over TLS to the API server. Injected failures
// carry a Kubernetes Status body, so client-go turns them into the same
// apierrors values a real API server would.
//
// Start-up paths (discovery, /version, /openapi, health checks) are left alone
// unless Config.Discovery is set: the tests exercise the controllers' reconcile
// paths, and controller-runtime's start-up REST mapping fails hard, rather
// than retrying, when discovery fails.
package faultproxy
