package faultproxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-dev/sluice/test/faultproxy"
)

func ExampleStart() {
	// Stands in for kube-apiserver.
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer apiserver.Close()
	pool := x509.NewCertPool()
	pool.AddCert(apiserver.Certificate())

	p, err := faultproxy.Start(faultproxy.Config{
		Upstream:    apiserver.URL,
		UpstreamTLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Seed:        42,
		Throttle:    1, // every request, to make the example's output certain
		WatchCut:    [2]time.Duration{5 * time.Second, 30 * time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = p.Close() }()

	resp, err := http.Get(p.URL() + "/api/v1/namespaces/default/pods")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	fmt.Println(resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
	fmt.Println(p.Stats())
	// Output:
	// 429 Retry-After: 1
	// requests=1 throttled=1 errors=0 lostAnswers=0 watchesCut=0 addedLatency=0s
}
