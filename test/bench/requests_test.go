package bench

import (
	"net/url"
	"testing"
)

// The client's count is compared with apiserver_request_total kind by kind,
// so a request must be named as the API server names it.
func TestRequestKindOf(t *testing.T) {
	for _, c := range []struct {
		method, url string
		want        string
	}{
		{"POST", "/api/v1/namespaces/ns/pods/web-1/eviction", "POST pods/eviction"},
		{"GET", "/api/v1/nodes/n1", "GET nodes"},
		{"PATCH", "/api/v1/nodes/n1", "PATCH nodes"},
		{"PATCH", "/api/v1/nodes/n1/status", "PATCH nodes/status"},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=500", "LIST pods"},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true", "WATCH pods"},
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb", "LIST pods"},
		{"GET", "/apis/policy/v1/poddisruptionbudgets?limit=500", "LIST poddisruptionbudgets"},
		{"GET", "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/web", "GET poddisruptionbudgets"},
		{"GET", "/apis/apps/v1/namespaces/ns/daemonsets/agent", "GET daemonsets"},
		{"GET", "/api/v1/namespaces/ns", "GET namespaces"},
		{"GET", "/api/v1/namespaces", "LIST namespaces"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "DELETECOLLECTION pods"},
		{"POST", "/api/v1/namespaces/default/events", "POST events"},
		{"GET", "/version", "GET (not a resource)"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKindOf(c.method, u).String(); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.url, got, c.want)
		}
	}
}
