package sandbox_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// TestServingCertificateIsVerified shows clients verify the API server against
// the sandbox CA: without it the connection is refused, with it it succeeds.
func TestServingCertificateIsVerified(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	if env.Config.Insecure || len(env.Config.CAData) == 0 {
		t.Fatalf("sandbox kubeconfig: want a CA and verification, got insecure=%v ca=%d bytes", env.Config.Insecure, len(env.Config.CAData))
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, env.Config.Host+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("an HTTPS client without the sandbox CA connected: the serving certificate is not being verified")
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("want an unknown-authority error without the CA, got %v", err)
	}
	if _, err := env.Client.Discovery().ServerVersion(); err != nil {
		t.Fatalf("a client with the sandbox CA: %v", err)
	}
}

// TestRBACIsEnforced shows the API server authorizes requests: a user with no
// bindings may not list nodes.
func TestRBACIsEnforced(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	cfg := env.Sandbox.RESTConfig()
	cfg.Impersonate.UserName = "nobody"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing nodes as an unbound user: want Forbidden, got %v", err)
	}
	v, err := env.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "34" {
		t.Errorf("server version %s.%s (%s): want the pinned 1.34", v.Major, v.Minor, v.GitVersion)
	}
}
