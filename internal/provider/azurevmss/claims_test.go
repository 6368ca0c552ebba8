package azurevmss_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
)

// written is a claim exactly as earlier releases wrote it: clusters
// upgraded with claims in flight must still read them, and a claim written
// back must keep the same layout.
const written = `{"machine":"web-a1b2c","pool":"web","subscription":"sub","resourceGroup":"rg","scaleSet":"aks-web-vmss",` +
	`"before":["vm-0","vm-1"],"capacity":3,"created":"2026-11-24T14:00:00Z"}`

func TestClaimsWrittenBeforeStillRead(t *testing.T) {
	kube := k8sfake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice-azure-vmss-claims", Namespace: "sluice-system"},
		Data: map[string]string{
			"web-a1b2c": written,
			// The key names the machine, even when the JSON does not.
			"web-d3e4f": `{"pool":"web","scaleSet":"aks-web-vmss","instanceID":"4","vmID":"v4","created":"2026-11-24T14:00:00Z"}`,
		},
	})
	claims := azurevmss.NewConfigMapClaims(kube, "sluice-system")
	c, err := claims.Get(ctx(t), "web-a1b2c")
	if err != nil || c == nil {
		t.Fatalf("get = %v, %v; want the claim", c, err)
	}
	if c.Machine != "web-a1b2c" || c.ScaleSet != "aks-web-vmss" || c.Capacity != 3 || len(c.Before) != 2 ||
		!c.Created.Equal(time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)) {
		t.Errorf("claim = %+v, want the one written", c)
	}
	all, err := claims.List(ctx(t))
	if err != nil || len(all) != 2 || all[0].Machine != "web-a1b2c" || all[1].Machine != "web-d3e4f" || all[1].InstanceID != "4" {
		t.Fatalf("list = %v, %v; want both claims by machine name", all, err)
	}
	if err := claims.Put(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.CoreV1().ConfigMaps("sluice-system").Get(ctx(t), azurevmss.ClaimsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["web-a1b2c"]; got != written {
		t.Errorf("written back as\n%s\nwant\n%s", got, written)
	}
}
