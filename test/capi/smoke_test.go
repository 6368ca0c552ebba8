package capi

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sluice-dev/sluice/internal/sandbox/capi"
)

func TestClusterAPIMakesNodes(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	md := capi.Workers{Namespace: w.Namespace, Cluster: w.cluster, Name: "md-0", Replicas: 2}
	if err := md.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	w.WaitFor(t, 2*time.Minute, "2 Machines with a nodeRef", func(context.Context) (bool, error) {
		n := 0
		for _, m := range w.machines(t) {
			if name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); name != "" {
				n++
			}
		}
		return n == 2, nil
	})
}
