package gcpmig_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
)

// A reboot is one instances.reset of the machine's instance, in its zone
// of a regional group, returned once Compute Engine answered the
// operation: no wait for it, and nothing else changed.
func TestARebootResetsTheInstanceWithoutWaiting(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "web", Region: "europe-west1", Size: 2, Template: nodeTemplate("n2-standard-4")})
	np := w.pool("web", regional("web", "europe-west1"))
	p := w.provider(t)
	m := mustCreate(t, p, np, provider.NewName("web"))
	w.cloud.Settle()
	asked := len(w.cloud.Requests())

	if err := p.Reboot(context.Background(), m.Name); err != nil {
		t.Fatalf("Reboot(%s): %v", m.Name, err)
	}
	for _, name := range w.cloud.Instances("web") {
		want := 0
		if name == m.Name {
			want = 1
		}
		if n := w.cloud.Resets(name); n != want {
			t.Errorf("instance %s reset %d times; want %d", name, n, want)
		}
	}
	var resets int
	for _, r := range w.cloud.Requests()[asked:] {
		switch {
		case r.Method == http.MethodPost && r.Path == "/compute/v1/projects/"+gcptest.Project+"/zones/"+m.Zone+"/instances/"+m.Name+"/reset":
			resets++
		case strings.Contains(r.Path, "/operations/"):
			t.Errorf("%s %s: Reboot waited for the reset; it returns once Compute Engine accepted it", r.Method, r.Path)
		case r.Method != http.MethodGet && !strings.HasSuffix(r.Path, "/listManagedInstances"):
			t.Errorf("%s %s: a reboot changes nothing but the instance's run", r.Method, r.Path)
		}
	}
	if resets != 1 {
		t.Errorf("%d resets of %s in zone %s; want 1", resets, m.Name, m.Zone)
	}
	if got := w.cloud.TargetSize("web"); got != 3 {
		t.Errorf("targetSize after a reboot = %d; want 3, as before", got)
	}
}

// A Node the group made by its own resize is rebooted by the name NameOf
// gives it; an instance no pool's group made is not found, and not reset.
func TestAGroupMadeNodeIsRebootedByItsProviderID(t *testing.T) {
	w := newWorld(t)
	w.cloud.AddGroup(gcptest.Group{Name: "nodes", Zone: "us-east1-b", Size: 2, Template: nodeTemplate("n2-standard-4")})
	w.cloud.AddVM("us-east1-b", "bastion", "e2-small")
	w.pool("web", zonal("nodes", "us-east1-b"))
	p := w.provider(t)

	victim := w.cloud.Instances("nodes")[1]
	id, _ := kubeletID(t, w, victim)
	name := p.NameOf(node(victim, id))
	if err := p.Reboot(context.Background(), name); err != nil {
		t.Fatalf("Reboot(%s): %v", name, err)
	}
	if n := w.cloud.Resets(victim); n != 1 {
		t.Errorf("instance %s reset %d times; want 1", victim, n)
	}
	bastion := p.NameOf(node("bastion", "gce://"+gcptest.Project+"/us-east1-b/bastion"))
	if err := p.Reboot(context.Background(), bastion); !provider.IsNotFound(err) {
		t.Errorf("Reboot(%s) of an instance no group made = %v; want an error for which provider.IsNotFound is true", bastion, err)
	}
	if n := w.cloud.Resets("bastion"); n != 0 {
		t.Errorf("bastion reset %d times; want 0", n)
	}
}
