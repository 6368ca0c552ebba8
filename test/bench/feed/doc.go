// Package feed is an in-memory Kubernetes API server for the fleet
// benchmark. A real API server on this 2-core machine cannot be filled with
// 150,000 pods in a reasonable time, so the benchmark hands the objects a
// real one would hold to a Server instead, and points the unmodified
// `sluice controller`, `sluice status` and `sluice doctor` binaries at it.
//
// What it serves, and why the controller's costs measured against it are
// the ones it has against an API server: discovery for the kinds it holds;
// LIST, paged with limit and continue as the API server pages (from a
// snapshot, so a paged list is consistent), with label and field selectors;
// WATCH from a resource version, as a stream of events in JSON or protobuf,
// whichever the client asks for, so the client decodes what it would decode;
// and the writes a controller makes (create, update, JSON merge, strategic
// merge and JSON patches, status subresources, delete with finalizers), each
// bumping the resource version and reaching every watch, with optimistic
// concurrency on resourceVersion and metadata.generation bumped when a
// spec changes.
//
// What it does not do, so a benchmark must not depend on it: admission,
// defaulting and validation (the objects it is given carry the defaults an
// API server would have added), server-side apply, evictions and bindings
// (refused with 500 and counted, so a benchmark can assert none was asked),
// graceful pod deletion, garbage collection, and the latency of etcd.
package feed
