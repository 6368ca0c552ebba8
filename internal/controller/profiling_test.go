package controller

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The profiles are served only when asked for, and then a heap profile is
// one GET away.
func TestProfilingIsServedOnlyWhenAskedFor(t *testing.T) {
	if h := profiling(false); h != nil {
		t.Fatalf("profiling off serves %d handlers", len(h))
	}
	mux := http.NewServeMux()
	for path, h := range profiling(true) {
		mux.Handle(path, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{"/debug/pprof/": "heap", "/debug/pprof/heap?debug=1": "heap profile"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), want) {
			t.Errorf("GET %s: %s, body without %q", path, resp.Status, want)
		}
	}
}
