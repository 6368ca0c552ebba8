package gcpmig_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A Node the pool's group made by its own resize is named by NameOf from
// its providerID; Get finds it through the group its created-by names, and
// Delete deletes exactly that instance through the group, lowering its
// targetSize, and again is no error. Instances no group of the pool made
// are refused, and nothing of them is deleted.
func TestGroupMadeInstances(t *testing.T) {
	for name, g := range map[string]gcptest.Group{
		"zonal":    {Name: "nodes", Zone: "us-east1-b", Size: 3, Template: nodeTemplate("n2-standard-4")},
		"regional": {Name: "nodes", Region: "us-east1", Size: 3, Template: nodeTemplate("n2-standard-4")},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			w.cloud.AddGroup(g)
			w.cloud.AddGroup(gcptest.Group{Name: "other", Zone: "us-east1-b", Size: 1, Template: nodeTemplate("n2-standard-4")})
			w.cloud.AddVM("us-east1-b", "bastion", "e2-small")
			w.pool("web", poolGroup(g))
			p := w.provider(t) // never handed the pool: it lists the pools

			own := w.cloud.Instances("nodes")
			victim := own[1]
			id, zone := kubeletID(t, w, victim)
			mname := p.NameOf(node(victim, id))
			if want := "gce-instance/" + gcptest.Project + "/" + zone + "/" + victim; mname != want {
				t.Fatalf("NameOf(a Node the group made) = %q; want %q", mname, want)
			}
			m, err := p.Get(ctx, mname)
			if err != nil {
				t.Fatalf("Get(%s): %v", mname, err)
			}
			if m.Name != mname || m.Pool != "web" || m.ProviderID != id || m.Zone != zone || m.State != provider.StateRunning || m.InstanceType != "n2-standard-4" {
				t.Errorf("Get = %+v; want name %s, pool web, providerID %s, zone %s, Running, n2-standard-4", m, mname, id, zone)
			}

			if err := p.Delete(ctx, mname); err != nil {
				t.Fatalf("Delete(%s): %v", mname, err)
			}
			if got := w.cloud.TargetSize("nodes"); got != 2 {
				t.Errorf("targetSize after deleting one of 3 = %d; want 2: the group must not make it again", got)
			}
			if err := p.Delete(ctx, mname); err != nil {
				t.Errorf("Delete again while the instance is being deleted: %v; want no error", err)
			}
			w.cloud.Settle()
			if err := p.Delete(ctx, mname); err != nil {
				t.Errorf("Delete again once the instance is gone: %v; want no error", err)
			}
			if got, want := w.cloud.Instances("nodes"), slices.Delete(slices.Clone(own), 1, 2); !slices.Equal(got, want) || w.cloud.TargetSize("nodes") != 2 {
				t.Errorf("the group holds %v (targetSize %d); want %v (2): exactly the deleted instance gone", got, w.cloud.TargetSize("nodes"), want)
			}
			if _, err := p.Get(ctx, mname); !provider.IsNotFound(err) {
				t.Errorf("Get after Delete: %v; want not found", err)
			}

			other := w.cloud.Instances("other")[0]
			otherID, _ := kubeletID(t, w, other)
			for _, tc := range []struct {
				node *corev1.Node
				why  string
			}{
				{node(other, otherID), "none of a gcp-mig NodePool's"},
				{node("bastion", "gce://"+gcptest.Project+"/us-east1-b/bastion"), "not made by a managed instance group"},
			} {
				foreign := p.NameOf(tc.node)
				err := p.Delete(ctx, foreign)
				if e, ok := provider.AsError(err); !ok || e.Code != gcpmig.CodeForeignInstance || !strings.Contains(e.Message, tc.why) {
					t.Errorf("Delete(%s): %v; want ForeignInstance saying %q", foreign, err, tc.why)
				}
				if _, err := p.Get(ctx, foreign); !provider.IsNotFound(err) || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("Get(%s): %v; want not found, saying %q", foreign, err, tc.why)
				}
			}
			w.cloud.Settle()
			if got := w.cloud.Instances("other"); len(got) != 1 || w.cloud.TargetSize("other") != 1 {
				t.Errorf("the other group holds %v (targetSize %d); want its one instance untouched", got, w.cloud.TargetSize("other"))
			}
			for _, r := range w.cloud.Requests() {
				if strings.HasSuffix(r.Path, "/deleteInstances") && !strings.Contains(r.Path, "/instanceGroupManagers/nodes/") {
					t.Errorf("request %s %s; want no deletion outside the pool's group", r.Method, r.Path)
				}
			}
		})
	}
}

// NameOf leaves a Node sluice named (its own name is the machine's) and a
// Node not on Compute Engine to the Node's name.
func TestNameOfLeavesOthers(t *testing.T) {
	p := newWorld(t).provider(t)
	for _, n := range []*corev1.Node{
		node("web-7fq2k", "gce://"+gcptest.Project+"/us-east1-b/web-7fq2k"),
		node("ip-10-0-1-7", "aws:///us-east-1a/i-0abc1234def567890"),
		node("web-7fq2k", ""),
	} {
		if got := p.NameOf(n); got != "" {
			t.Errorf("NameOf(%s, %q) = %q; want \"\"", n.Name, n.Spec.ProviderID, got)
		}
	}
}

// An instance made by createInstances carries its group's created-by too:
// the name NameOf would give it finds it in its pool.
func TestCreatedInstanceFoundByCreatedBy(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Template: nodeTemplate("e2-standard-2")})
	pool := w.pool("web", zonal("nodes", "us-east1-b"))
	p := w.provider(t)
	mustCreate(t, p, pool, "web-aaaaa")
	w.cloud.Settle()
	m, err := p.Get(context.Background(), "gce-instance/"+gcptest.Project+"/us-east1-b/web-aaaaa")
	if err != nil || m.Pool != "web" {
		t.Fatalf("Get by the instance's place = %+v, %v; want the machine, of pool web", m, err)
	}
}

// The lead's end-to-end case in small: a group of 6 instances of its own,
// each replaced by a machine of sluice's and then deleted by the name the
// controller reads from its Node, still holds 6.
func TestReplaceEveryGroupMadeInstance(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Size: 6, Template: nodeTemplate("e2-standard-2")})
	pool := w.pool("web", zonal("nodes", "us-east1-b"))
	p := w.provider(t)
	before := w.cloud.Instances("nodes")
	for _, old := range before {
		mustCreate(t, p, pool, provider.NewName("web"))
		id, _ := kubeletID(t, w, old)
		if err := p.Delete(ctx, p.NameOf(node(old, id))); err != nil {
			t.Fatalf("deleting %s: %v", old, err)
		}
		w.cloud.Settle()
	}
	after := w.cloud.Instances("nodes")
	if len(after) != 6 || w.cloud.TargetSize("nodes") != 6 || slices.ContainsFunc(after, func(n string) bool { return slices.Contains(before, n) }) {
		t.Errorf("after replacing all 6: the group holds %v (targetSize %d); want 6 new ones and none of %v", after, w.cloud.TargetSize("nodes"), before)
	}
	if ms, err := p.List(ctx, "web"); err != nil || len(ms) != 6 {
		t.Errorf("List = %d machines, %v; want the 6 replacements", len(ms), err)
	}
}

// ClusterPoolList reads the cluster's NodePools from the API server.
func TestClusterPoolList(t *testing.T) {
	gv := v1alpha1.SchemeGroupVersion
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/"+gv.String()+"/nodepools" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"` + gv.String() + `","kind":"NodePoolList","items":[` +
			`{"metadata":{"name":"web"},"spec":{"provider":{"name":"gcp-mig","gcp":{"project":"p","instanceGroups":[{"name":"nodes","zone":"us-east1-b"}]}}}}]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := provider.ClusterPoolList(c)(context.Background())
	if err != nil || len(pools) != 1 || pools[0].Name != "web" || pools[0].Spec.Provider.GCP.InstanceGroups[0].Name != "nodes" {
		t.Errorf("ClusterPoolList = %+v, %v; want pool web over group nodes", pools, err)
	}
}

// kubeletID is the providerID and zone the instance's Node registers with.
func kubeletID(t *testing.T, w *world, instance string) (string, string) {
	t.Helper()
	_, _, id, zone, ok := w.cloud.Kubelet(instance)
	if !ok {
		t.Fatalf("instance %s runs no kubelet", instance)
	}
	return id, zone
}

// poolGroup is the pool's entry for the group.
func poolGroup(g gcptest.Group) v1alpha1.InstanceGroup {
	if g.Region != "" {
		return regional(g.Name, g.Region)
	}
	return zonal(g.Name, g.Zone)
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}
