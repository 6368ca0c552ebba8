package azurearm

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type record struct {
	Pool  string `json:"pool"`
	Count int    `json:"count"`
}

func TestStoreKeepsOneRecordPerMachine(t *testing.T) {
	ctx := context.Background()
	s := NewStore[record](fake.NewClientset(), "sluice-system", "claims")
	if got, err := s.Get(ctx, "web-a"); got != nil || err != nil {
		t.Fatalf("Get before any write = %v, %v; want nil, nil", got, err)
	}
	for _, m := range []string{"web-b", "web-a"} {
		if err := s.Put(ctx, m, &record{Pool: "web", Count: len(m)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "web-a", &record{Pool: "web", Count: 9}); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 2 || all[0].Machine != "web-a" || all[0].Value.Count != 9 || all[1].Machine != "web-b" {
		t.Fatalf("List = %+v, %v; want web-a (count 9) and web-b, sorted", all, err)
	}
	if err := s.Delete(ctx, "web-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "never"); err != nil {
		t.Errorf("Delete of no record: %v; want nil", err)
	}
	if got, _ := s.Get(ctx, "web-a"); got != nil {
		t.Errorf("Get after Delete = %+v; want nil", got)
	}
}

// A write that loses a race to another writer reads again and keeps both.
func TestStoreRetriesAConflict(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := NewStore[record](kube, "sluice-system", "claims")
	if err := s.Put(ctx, "web-a", &record{Pool: "web"}); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	kube.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "claims", nil)
	})
	if err := s.Put(ctx, "web-b", &record{Pool: "web"}); err != nil {
		t.Fatalf("Put after a conflict: %v", err)
	}
	if all, _ := s.List(ctx); len(all) != 2 {
		t.Errorf("List = %+v; want both records", all)
	}
}
