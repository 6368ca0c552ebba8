package gcpmig_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A regional group puts the machine in a zone of its distribution policy;
// the machine's providerID and zone are that zone's, and deleting it lowers
// the group's targetSize.
func TestRegionalGroup(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes", Region: "us-central1", Zones: []string{"us-central1-a", "us-central1-f"}, Size: 1,
		Template: nodeTemplate("e2-standard-8")})
	p := w.provider(t)
	pool := w.pool("web", regional("nodes", "us-central1"))
	m := mustCreate(t, p, pool, "web-7fq2k")
	if m.Zone != "us-central1-f" || m.ProviderID != "gce://"+gcptest.Project+"/us-central1-f/web-7fq2k" || m.InstanceType != "e2-standard-8" {
		t.Errorf("machine = zone %q, providerID %q, type %q; want the group's emptier zone us-central1-f, its gce:// providerID, e2-standard-8", m.Zone, m.ProviderID, m.InstanceType)
	}
	if got := w.cloud.TargetSize("nodes"); got != 2 {
		t.Errorf("targetSize after a create = %d; want 2", got)
	}
	if err := p.Delete(context.Background(), m.Name); err != nil {
		t.Fatal(err)
	}
	if got := w.cloud.TargetSize("nodes"); got != 1 {
		t.Errorf("targetSize after the delete = %d; want 1: the group must not make the machine again", got)
	}
	w.cloud.Settle()
	if _, err := p.Get(context.Background(), m.Name); !provider.IsNotFound(err) {
		t.Errorf("Get after Delete: %v; want not found", err)
	}
}

// A zonal group's machine is in its zone, and Get finds it with a provider
// that was never handed the pool (after a restart) through Options.Pools.
func TestZonalGroupAfterRestart(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes-b", Zone: "europe-west4-b", Template: nodeTemplate("n2-standard-4")})
	pool := w.pool("web", zonal("nodes-b", "europe-west4-b"))
	mustCreate(t, w.provider(t), pool, "web-00abc")
	w.cloud.Settle()
	m, err := w.provider(t).Get(context.Background(), "web-00abc")
	if err != nil {
		t.Fatal(err)
	}
	if m.Pool != "web" || m.Zone != "europe-west4-b" || m.State != provider.StateRunning || m.Created.IsZero() {
		t.Errorf("Get = pool %q, zone %q, state %s, created %v; want web, europe-west4-b, Running, the instance's creation time", m.Pool, m.Zone, m.State, m.Created)
	}
}

// A group of a GKE node pool is refused, saying why and what to use.
func TestGKEGroupRefused(t *testing.T) {
	for name, g := range map[string]gcptest.Group{
		"label":    {Name: "nodes", Zone: "us-east1-b", Template: gcptest.Template{MachineType: "e2-medium", Labels: map[string]string{"goog-gke-node": ""}}},
		"metadata": {Name: "nodes", Zone: "us-east1-b", Template: gcptest.Template{MachineType: "e2-medium", Metadata: map[string]string{"cluster-uid": "4f2c", "cluster-location": "us-east1", "kube-env": "KUBELET_ARGS: --v=2"}}},
		"name":     {Name: "gke-prod-default-pool-4c3e6b0a-grp", Zone: "us-east1-b", Template: gcptest.Template{MachineType: "e2-medium"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.cloud.AddGroup(g)
			p := w.provider(t)
			pool := w.pool("web", zonal(g.Name, g.Zone))
			_, err := p.Create(context.Background(), pool, "web-aaaaa")
			e, ok := provider.AsError(err)
			if !ok || e.Code != provider.CodeInvalidTemplate || !strings.Contains(e.Message, "GKE reconciles") || !strings.Contains(e.Message, "gcloud container node-pools") {
				t.Errorf("Create in a GKE node pool's group: %v; want InvalidTemplate saying GKE reconciles it and to use its node pool operations", err)
			}
			if n := len(w.cloud.Instances(g.Name)); n != 0 {
				t.Errorf("the GKE group holds %d instances; want none", n)
			}
			if _, err := p.CheckRegistration(context.Background(), pool); !strings.Contains(fmtErr(err), "GKE") {
				t.Errorf("CheckRegistration of a GKE group: %v; want the GKE refusal", err)
			}
		})
	}
}

// A pool with no project or groups cannot be checked: CheckRegistration
// says it cannot tell, never that the pool registers tainted.
func TestCheckRegistrationOfEmptySpec(t *testing.T) {
	w := newWorld(t)
	p := w.provider(t)
	for name, spec := range map[string]*v1alpha1.GCPProviderSpec{
		"none":       nil,
		"no groups":  {Project: gcptest.Project},
		"no project": {InstanceGroups: []v1alpha1.InstanceGroup{zonal("nodes", "us-east1-b")}},
	} {
		pool := w.pool("web")
		pool.Spec.Provider.GCP = spec
		if reason, err := p.CheckRegistration(context.Background(), pool); !errors.Is(err, provider.ErrCannotTell) || !strings.Contains(err.Error(), "instanceGroups") {
			t.Errorf("%s: CheckRegistration = %q, %v; want ErrCannotTell saying what the spec lacks", name, reason, err)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A template image different from the group's makes one new instance
// template, used by the group for new instances only; asking again finds
// it. A PROACTIVE group, which would replace its instances, is refused.
func TestImageChange(t *testing.T) {
	w := newWorld(t)
	old := w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Size: 1, Template: nodeTemplate("n2-standard-2")})
	p := w.provider(t)
	pool := w.pool("web", zonal("nodes", "us-east1-b"))
	before := w.cloud.Instances("nodes")
	pool.Spec.Template.Image = gcptest.ImageUbuntu
	a := mustCreate(t, p, pool, "web-aaaaa")
	b := mustCreate(t, p, pool, "web-bbbbb")
	if a.Image != gcptest.ImageUbuntu || b.Image != gcptest.ImageUbuntu {
		t.Errorf("machines' images = %q, %q; want %s", a.Image, b.Image, gcptest.ImageUbuntu)
	}
	if templates := w.cloud.Templates(); len(templates) != 2 {
		t.Errorf("templates after two creates with one new image = %v; want the group's and one more", templates)
	}
	if got := w.cloud.InstanceTemplateOf(before[0]); got != old {
		t.Errorf("the group's earlier instance is now of template %s; want it left on %s", got, old)
	}
	if n := len(w.cloud.Instances("nodes")); n != 3 {
		t.Errorf("the group holds %d instances; want its 1 and the 2 new ones (none replaced)", n)
	}

	w.cloud.AddGroup(gcptest.Group{Name: "rolling", Zone: "us-east1-c", UpdatePolicy: "PROACTIVE", Template: nodeTemplate("n2-standard-2")})
	rolling := w.pool("batch", zonal("rolling", "us-east1-c"))
	rolling.Spec.Template.Image = gcptest.ImageUbuntu
	_, err := p.Create(context.Background(), rolling, "batch-aaaaa")
	if e, ok := provider.AsError(err); !ok || e.Code != provider.CodeInvalidTemplate || !strings.Contains(e.Message, "PROACTIVE") {
		t.Errorf("an image for a PROACTIVE group: %v; want InvalidTemplate naming PROACTIVE", err)
	}
}

// A group whose zone had no capacity is passed over for the next group,
// nothing is left in it, and it is not asked again for a while.
func TestExhaustedZoneSkipped(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes-b", Zone: "us-east1-b", Template: nodeTemplate("n2-standard-2")})
	w.cloud.AddGroup(gcptest.Group{Name: "nodes-c", Zone: "us-east1-c", Template: nodeTemplate("n2-standard-2")})
	w.cloud.Exhaust("us-east1-b")
	p := w.provider(t)
	pool := w.pool("web", zonal("nodes-b", "us-east1-b"), zonal("nodes-c", "us-east1-c"))
	if m := mustCreate(t, p, pool, "web-aaaaa"); m.Zone != "us-east1-c" {
		t.Errorf("machine in zone %s; want us-east1-c, the exhausted zone's group passed over", m.Zone)
	}
	w.cloud.Settle()
	if got := w.cloud.Instances("nodes-b"); len(got) != 0 || w.cloud.TargetSize("nodes-b") != 0 {
		t.Errorf("the exhausted group holds %v (targetSize %d); want nothing left for it to retry", got, w.cloud.TargetSize("nodes-b"))
	}
	asked := createsIn(w, "nodes-b")
	mustCreate(t, p, pool, "web-bbbbb")
	if n := createsIn(w, "nodes-b"); n != asked {
		t.Errorf("the exhausted group was asked %d more times within a minute of its refusal; want 0", n-asked)
	}
	w.cloud.Exhaust("us-east1-c")
	_, err := p.Create(context.Background(), pool, "web-ccccc")
	if e, ok := provider.AsError(err); !ok || e.Code != provider.CodeInsufficientCapacity || !e.Retryable {
		t.Errorf("Create with every zone exhausted: %v; want InsufficientCapacity, retryable", err)
	}
}

func createsIn(w *world, group string) int {
	return len(slices.DeleteFunc(w.cloud.Requests(), func(r gcptest.Request) bool {
		return !strings.HasSuffix(r.Path, "/instanceGroupManagers/"+group+"/createInstances")
	}))
}

// A pool's template.instanceTypes passes over a group of another machine
// type.
func TestInstanceTypes(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "small", Zone: "us-east1-b", Template: nodeTemplate("e2-small")})
	w.cloud.AddGroup(gcptest.Group{Name: "large", Zone: "us-east1-b", Template: nodeTemplate("n2-standard-16")})
	pool := w.pool("web", zonal("small", "us-east1-b"), zonal("large", "us-east1-b"))
	pool.Spec.Template.InstanceTypes = []string{"n2-standard-16"}
	if m := mustCreate(t, w.provider(t), pool, "web-aaaaa"); m.InstanceType != "n2-standard-16" {
		t.Errorf("machine of type %s; want n2-standard-16, the only type the pool allows", m.InstanceType)
	}
}

// CheckRegistration reads the kubelet flags of the groups' templates.
func TestCheckRegistration(t *testing.T) {
	for name, tc := range map[string]struct {
		template gcptest.Template
		want     string // "" none, "cannot" ErrCannotTell, else a word of the reason
	}{
		"tainted": {template: nodeTemplate("e2-small")},
		"untainted": {template: gcptest.Template{MachineType: "e2-small", NodeTaints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}},
			want: "--register-with-taints"},
		"no kubelet": {template: gcptest.Template{MachineType: "e2-small", Metadata: map[string]string{"startup-script": "", "startup-script-url": "gs://boot/node.sh"}},
			want: "cannot"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Template: tc.template})
			reason, err := w.provider(t).CheckRegistration(context.Background(), w.pool("web", zonal("nodes", "us-east1-b")))
			switch {
			case tc.want == "cannot":
				if !errors.Is(err, provider.ErrCannotTell) {
					t.Errorf("CheckRegistration = %q, %v; want ErrCannotTell", reason, err)
				}
			case err != nil || !strings.Contains(reason, tc.want) || (tc.want == "") != (reason == ""):
				t.Errorf("CheckRegistration = %q, %v; want a reason holding %q", reason, err, tc.want)
			}
		})
	}
}

func TestCheckImage(t *testing.T) {
	for image, ok := range map[string]bool{
		"": true,
		"projects/debian-cloud/global/images/family/debian-12":                                        true,
		"projects/my-proj/global/images/node-2026-11-30":                                              true,
		"https://www.googleapis.com/compute/v1/projects/cos-cloud/global/images/cos-121-18867-199-28": true,
		"debian-12":                            false,
		"projects/debian-cloud/global/images/": false,
		"ami-0abc1234def567890":                false,
		"projects/p/global/images/Upper":       false,
	} {
		if err := gcpmig.CheckImage(image); (err == nil) != ok {
			t.Errorf("CheckImage(%q) = %v; want ok %v", image, err, ok)
		}
	}
}

// Delete of a machine whose pool cannot be found (the NodePool was deleted
// with machines left, or its provider changed) is refused, saying what to
// do, and deletes nothing; one the pool's groups do not list is no error.
func TestDeleteOfUnknownPoolRefused(t *testing.T) {
	for name, change := range map[string]func(w *world){
		"pool deleted":     func(w *world) { delete(w.pools, "web") },
		"provider changed": func(w *world) { w.pools["web"].Spec.Provider.Name = "none" },
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Template: nodeTemplate("e2-medium")})
			pool := w.pool("web", zonal("nodes", "us-east1-b"))
			mustCreate(t, w.provider(t), pool, "web-k3x9a")
			w.cloud.Settle()
			change(w)
			p := w.provider(t) // after a restart: only the cluster's NodePools count
			err := p.Delete(context.Background(), "web-k3x9a")
			if e, ok := provider.AsError(err); !ok || e.Code != gcpmig.CodeUnknownPool || !strings.Contains(e.Message, "delete-instances") {
				t.Errorf("Delete of a machine of no gcp-mig pool: %v; want UnknownPool saying how to delete the instance", err)
			}
			if got := w.cloud.Instances("nodes"); !slices.Equal(got, []string{"web-k3x9a"}) {
				t.Errorf("the group holds %v; want the instance left as it was", got)
			}
			if err := p.Delete(context.Background(), "ops-k3x9a"); err == nil {
				t.Error("Delete of a machine of a pool that never was: nil; want a refusal")
			}
		})
	}
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Template: nodeTemplate("e2-medium")})
	w.pool("web", zonal("nodes", "us-east1-b"))
	if err := w.provider(t).Delete(context.Background(), "web-zzzzz"); err != nil {
		t.Errorf("Delete of a machine the pool's group does not list: %v; want nil", err)
	}
}
