package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/test/faultproxy"
)

// These tests show what a controller sees through the proxy: client-go's
// own handling of the injected answers.

func TestClientGoRetriesThrottling(t *testing.T) {
	up, created := podServer(t)
	p := start(t, up, faultproxy.Config{Seed: 1, Throttle: 0.5})
	client := clientFor(t, p)

	gets := 0
	for p.Stats().Throttled == 0 && gets < 10 {
		gets++
		pod, err := client.CoreV1().Pods("default").Get(context.Background(), "x", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %d: %v; want 429s retried by client-go", gets, err)
		}
		if pod.Name != "x" {
			t.Fatalf("got pod %q, want x", pod.Name)
		}
	}
	if p.Stats().Throttled == 0 {
		t.Fatalf("no request throttled in %d gets", gets)
	}
	if up.hits.Load() != int64(gets) || created.Load() != 0 {
		t.Errorf("upstream got %d requests for %d gets", up.hits.Load(), gets)
	}
}

func TestClientGoSurfacesServerErrors(t *testing.T) {
	up, _ := podServer(t)
	p := start(t, up, faultproxy.Config{Seed: 1, Errors: 1})
	client := clientFor(t, p)

	// Each code must come out as the apierrors value a real API server's
	// would; 503s with Retry-After are retried until a code without it.
	is := map[int32]func(error) bool{
		500: apierrors.IsInternalError,
		502: apierrors.IsInternalError,
		503: apierrors.IsServiceUnavailable,
		504: apierrors.IsTimeout,
	}
	seen500 := false
	for i := 0; i < 20 && !seen500; i++ {
		_, err := client.CoreV1().Pods("default").Get(context.Background(), "x", metav1.GetOptions{})
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			t.Fatalf("get: %v, want an API status error", err)
		}
		code := status.Status().Code
		if !is[code](err) {
			t.Errorf("a %d came out as %v (reason %q)", code, err, apierrors.ReasonForError(err))
		}
		seen500 = seen500 || code == http.StatusInternalServerError
	}
	if !seen500 {
		t.Errorf("no 500 in 20 gets")
	}
	if up.hits.Load() != 0 {
		t.Errorf("upstream got %d requests, want none", up.hits.Load())
	}
}

func TestClientGoCannotTellALostAnswerSucceeded(t *testing.T) {
	up, created := podServer(t)
	p := start(t, up, faultproxy.Config{Seed: 1, LostAnswers: 1})
	client := clientFor(t, p)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: "default"}}
	_, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if !apierrors.IsTimeout(err) && !apierrors.IsInternalError(err) {
		t.Errorf("create: %v, want a timeout or internal error", err)
	}
	if created.Load() != 1 {
		t.Errorf("upstream created %d pods, want 1", created.Load())
	}
}

// podServer is an upstream that knows one pod, default/x, and accepts pod
// creations, counting them.
func podServer(t *testing.T) (*upstream, *atomic.Int64) {
	t.Helper()
	created := &atomic.Int64{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer x" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/default/pods/x":
			_, _ = io.WriteString(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","namespace":"default"}}`)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/default/pods":
			created.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.Copy(w, r.Body)
		default:
			http.NotFound(w, r)
		}
	})
	return up, created
}

func clientFor(t *testing.T, p *faultproxy.Proxy) kubernetes.Interface {
	t.Helper()
	// A negative QPS turns client-go's own rate limiter off.
	client, err := kubernetes.NewForConfig(&rest.Config{Host: p.URL(), BearerToken: "x", QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
