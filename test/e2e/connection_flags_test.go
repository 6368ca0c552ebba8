package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// Every command that talks to a cluster takes kubectl's connection flags
// (k8s.io/cli-runtime's): here --server, --token and --certificate-authority
// with no kubeconfig at all, --as over the administrator's kubeconfig, and
// --context. The API server decides who the caller is: a service account
// that may read nodes and NodePools gets the status; one it impersonates
// without those rights is refused by name.
func TestKubectlConnectionFlags(t *testing.T) {
	env := sandboxtest.New(t)
	bin := sandboxtest.Sluice(t)
	ctx := context.Background()
	ns := env.Namespace
	reader := sandboxtest.UniqueName("reader")
	for _, sa := range []string{reader, "nobody"} {
		if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: reader}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"sluice.dev"}, Resources: []string{"nodepools"}, Verbs: []string{"get", "list"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: reader},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: reader, Namespace: ns}}}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), reader, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoles().Delete(context.Background(), reader, metav1.DeleteOptions{})
	})
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, reader, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, env.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // nothing to fall back on

	out, stderr, code := run(t, bin, "status", "-o", "json", "--server", env.Config.Host, "--token", tok.Status.Token, "--certificate-authority", ca)
	if code != 0 || !strings.Contains(out, `"pools"`) {
		t.Errorf("status with --server, --token and --certificate-authority: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(out+stderr, tok.Status.Token) {
		t.Error("the token was printed")
	}

	_, stderr, code = run(t, bin, "status", "--kubeconfig", kubeconfig, "--as", "system:serviceaccount:"+ns+":nobody")
	if code != 1 || !strings.Contains(stderr, "forbidden") || !strings.Contains(stderr, "system:serviceaccount:"+ns+":nobody") {
		t.Errorf("status --as nobody: exit %d, %q; want 1 and the API server's refusal naming the account", code, stderr)
	}
	_, stderr, code = run(t, bin, "doctor", "--kubeconfig", kubeconfig, "--as", "system:serviceaccount:"+ns+":nobody")
	if code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("doctor --as nobody: exit %d, %q; want 1 and forbidden", code, stderr)
	}
	_, stderr, code = run(t, bin, "status", "--kubeconfig", kubeconfig, "--context", "elsewhere")
	if code != 1 || !strings.Contains(stderr, `context "elsewhere" does not exist`) {
		t.Errorf("status --context elsewhere: exit %d, %q; want 1 naming the missing context", code, stderr)
	}
}
