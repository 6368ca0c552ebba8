// Package gcptest is a Compute Engine project for tests of the gcp-mig
// provider: an httptest server answering the REST calls the provider makes
// (cloud.google.com/go/compute/apiv1 over REST) as Google's reference
// documents them, over a model of managed instance groups, their instance
// templates and their instances.
//
// What it models, and where Google says so:
//
//   - instanceGroupManagers (zonal) and regionInstanceGroupManagers: get,
//     createInstances, deleteInstances, listManagedInstances and
//     setInstanceTemplate. Every mutation answers an Operation that is
//     RUNNING, and DONE when it is read again through zoneOperations,
//     regionOperations or globalOperations get or wait. createInstances
//     "is marked DONE if the createInstances request is successful", and
//     the instance's own creation is seen only in listManagedInstances
//     (compute/v1 instanceGroupManagers.createInstances reference): a
//     creation the zone has no capacity or quota for leaves the instance
//     CREATING with lastAttempt.errors (ZONE_RESOURCE_POOL_EXHAUSTED,
//     QUOTA_EXCEEDED), and the group keeps trying again at each Settle
//     until the instance is deleted.
//   - deleteInstances lowers targetSize at once, leaves the instance
//     DELETING until Settle, and skips instances that are not members or
//     already being deleted when skipInstancesOnValidationError is set (the
//     operation fails for them otherwise).
//   - A regional group puts a new instance in the zone of its distribution
//     policy holding the fewest of its instances ("When the group grows,
//     the group always tries to add VMs to the zones with the smallest
//     number of VMs", compute docs, regional-mig-rebalance-manually).
//   - setInstanceTemplate changes the template of the group's new
//     instances only: existing instances keep theirs whatever the
//     updatePolicy says (a PROACTIVE group would replace them; the fake
//     never does, and the provider refuses such groups).
//   - instanceTemplates get and insert (global only); an insert whose boot
//     disk names an image the project does not have is 404 notFound.
//   - instances get, for an instance that exists (404 while it is only a
//     managed instance being created). Its metadata items are its
//     template's and, for an instance a group made (by its own resize or
//     by createInstances), created-by: the group's partial URL with the
//     project's number, projects/<ProjectNumber>/zones/<zone> (or
//     regions/<region>)/instanceGroupManagers/<group> (compute docs,
//     getting-info-about-migs, "Checking if a VM instance is part of a
//     MIG"). AddVM makes an instance no group made, without created-by.
//   - instances reset, of an instance that exists (404 notFound otherwise,
//     as get): a zonal Operation of operationType reset whose targetLink is
//     the instance, RUNNING when answered, DONE when read again. The
//     instance stays RUNNING ("Throughout this process, the VM remains in
//     the RUNNING state", compute docs, reset-instance) and counts the reset
//     (Resets).
//   - Errors are Google's JSON error body
//     ({"error":{"code","message","errors":[{"domain","reason","message"}],"status"}}),
//     rate limits a 429 with reason rateLimitExceeded.
//
// What it cannot show: how Compute Engine answers a createInstances naming
// an instance already in the group (not documented; the fake answers 409
// alreadyExists, as for an insert of an existing resource, and the provider
// looks the name up before it asks); abandonInstances (an instance whose
// created-by names a group that no longer lists it); the other metadata
// items Compute Engine adds to a group's instances; listErrors; requestId deduplication;
// regional instance templates; all-instances configs, stateful policies,
// autoscalers and resize requests; instance flexibility; autohealing; the
// timing of a real creation (an attempt is decided at once, an instance
// runs at the next Settle); how a real boot image or startup script starts
// a kubelet (Kubelet reads the flags from the template's startup-script as
// a node would).
package gcptest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Project is the project the server holds, and ProjectNumber its number,
// which Compute Engine writes in created-by.
const (
	Project       = "sluice-test-493817"
	ProjectNumber = "493817"
)

// Images the project can boot, in the forms templates name them.
const (
	ImageDebian = "projects/debian-cloud/global/images/family/debian-12"
	ImageUbuntu = "projects/ubuntu-os-cloud/global/images/ubuntu-2404-noble-amd64-v20241115"
	ImageCOS    = "projects/cos-cloud/global/images/cos-121-18867-199-28"
)

// api is the prefix of the resource URLs Compute Engine answers with.
const api = "https://www.googleapis.com/compute/v1/"

// Group is a managed instance group to add: zonal (Zone) or regional
// (Region, spreading over Zones).
type Group struct {
	Name   string
	Zone   string
	Region string
	// Zones are a regional group's distributionPolicy zones; default the
	// region's -a, -b and -c.
	Zones []string
	// Template is the group's instance template.
	Template Template
	// UpdatePolicy is updatePolicy.type; "" is OPPORTUNISTIC.
	UpdatePolicy string
	// Size is how many instances the group has already, made by its own
	// resize (named after the group, as a group names them).
	Size int
}

// Template is an instance template to make.
type Template struct {
	// Name; default the group's name and "-tmpl".
	Name        string
	MachineType string
	// Image is the boot disk's initializeParams.sourceImage; default
	// ImageDebian.
	Image string
	// NodeLabels and NodeTaints are what the startup-script starts the
	// kubelet with (--node-labels, --register-with-taints).
	NodeLabels map[string]string
	NodeTaints []corev1.Taint
	// Metadata are more metadata items, or ones in place of the
	// startup-script made from NodeLabels and NodeTaints ("" drops one).
	Metadata map[string]string
	// Labels are properties.labels (a GKE node pool's carry goog-gke-node).
	Labels map[string]string
}

// Request is one request the server was sent, and its answer's status.
type Request struct {
	Method, Path string
	Status       int
}

// Server is a Compute Engine project behind an httptest server.
type Server struct {
	// URL is the server's address, for option.WithEndpoint.
	URL string

	clock clock.PassiveClock

	mu        sync.Mutex
	groups    map[string]*group         // by name (one project)
	vms       []*instance               // instances no group made (instances.insert)
	templates map[string]map[string]any // global instance templates by name, as inserted
	ops       map[string]map[string]any // by name
	images    map[string]bool
	exhausted map[string]bool // zones
	quota     int             // creation attempts that fail for quota
	throttled int             // requests answered 429
	next      int64
	log       []Request

	// DropAnswer, when it says so, loses the answer of a request the
	// server carried out (a connection reset after Google acted).
	DropAnswer func(Request) bool
}

type group struct {
	name, zone, region string
	zones              []string
	template           string // URL
	updatePolicy       string
	targetSize         int
	id                 int64
	instances          []*instance
}

type instance struct {
	name, zone, template string
	machineType          string // of a VM no group made (no template)
	id                   int64
	action, status       string
	errors               []attemptError
	created              time.Time
	resets               int // instances.reset accepted
}

type attemptError struct{ code, message string }

func (g *group) location() string {
	if g.region != "" {
		return "regions/" + g.region
	}
	return "zones/" + g.zone
}

func (g *group) selfLink() string {
	return api + "projects/" + Project + "/" + g.location() + "/instanceGroupManagers/" + g.name
}

func (i *instance) url() string {
	return api + "projects/" + Project + "/zones/" + i.zone + "/instances/" + i.name
}

// AddGroup makes a group and its template; it returns the template's URL.
func (s *Server) AddGroup(g Group) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := g.Template
	if t.Name == "" {
		t.Name = g.Name + "-tmpl"
	}
	s.templates[t.Name] = s.templateResource(t)
	gr := &group{name: g.Name, zone: g.Zone, region: g.Region, zones: g.Zones, updatePolicy: g.UpdatePolicy,
		template: api + "projects/" + Project + "/global/instanceTemplates/" + t.Name, id: s.id()}
	if gr.updatePolicy == "" {
		gr.updatePolicy = "OPPORTUNISTIC"
	}
	if gr.region != "" && len(gr.zones) == 0 {
		gr.zones = []string{gr.region + "-a", gr.region + "-b", gr.region + "-c"}
	}
	s.groups[g.Name] = gr
	for range g.Size {
		s.addOwn(gr)
	}
	return gr.template
}

// AddInstance makes an instance by the group's own resize (not sluice's):
// running, named after the group with four random characters, as a group
// names its instances.
func (s *Server) AddInstance(groupName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addOwn(s.groups[groupName])
}

func (s *Server) addOwn(g *group) string {
	name := fmt.Sprintf("%s-%s", g.name, base36(s.id(), 4))
	i := &instance{name: name, zone: s.zoneFor(g), template: g.template, id: s.id(), action: "NONE", status: "RUNNING", created: s.clock.Now()}
	g.instances = append(g.instances, i)
	g.targetSize++
	return name
}

// AddVM makes a running instance as instances.insert does, in no group:
// Compute Engine gives it no created-by metadata item.
func (s *Server) AddVM(zone, name, machineType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vms = append(s.vms, &instance{name: name, zone: zone, machineType: machineType, id: s.id(), action: "NONE", status: "RUNNING", created: s.clock.Now()})
}

// Exhaust makes the zone have no capacity: creations there fail with
// ZONE_RESOURCE_POOL_EXHAUSTED, and keep failing at each retry, until
// Restore.
func (s *Server) Exhaust(zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exhausted[zone] = true
}

// Restore gives the zone capacity again.
func (s *Server) Restore(zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.exhausted, zone)
}

// QuotaExceeded makes the next creation attempt fail with QUOTA_EXCEEDED
// (the region's CPUS quota); the group's retries after it succeed.
func (s *Server) QuotaExceeded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota++
}

// Throttle answers the next n requests 429 rateLimitExceeded.
func (s *Server) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttled += n
}

// Settle lets the groups finish what they started: a created instance
// runs, a deleted one is gone, and a creation that failed is tried again.
func (s *Server) Settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		g.instances = slices.DeleteFunc(g.instances, func(i *instance) bool { return i.action == "DELETING" })
		for _, i := range g.instances {
			if i.action == "CREATING" {
				s.attempt(i)
			}
			if i.status != "" {
				i.action, i.status = "NONE", "RUNNING"
			}
		}
	}
}

// Instances are the names of the group's instances, being created or
// deleted included, whoever asked for them.
func (s *Server) Instances(groupName string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if g := s.groups[groupName]; g != nil {
		for _, i := range g.instances {
			out = append(out, i.name)
		}
	}
	return out
}

// TargetSize is the group's targetSize.
func (s *Server) TargetSize(groupName string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[groupName].targetSize
}

// InstanceTemplate is the URL of the template the group makes new
// instances from.
func (s *Server) InstanceTemplate(groupName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[groupName].template
}

// InstanceTemplateOf is the URL of the template the instance was made
// from, "" for no such instance.
func (s *Server) InstanceTemplateOf(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, i := s.find(name); i != nil {
		return i.template
	}
	return ""
}

// Templates are the names of the project's instance templates.
func (s *Server) Templates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.templates))
}

// Resets is how many resets of the instance (of the name, in any zone)
// Compute Engine accepted.
func (s *Server) Resets(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.groups {
		for _, i := range g.instances {
			if i.name == name {
				n += i.resets
			}
		}
	}
	for _, i := range s.vms {
		if i.name == name {
			n += i.resets
		}
	}
	return n
}

// Requests are the requests the server was sent, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Kubelet is what the instance's kubelet registers its Node with, read as
// the node reads it: the labels and taints from the kubelet flags in its
// template's startup-script (never from a pool), the providerID
// cloud-provider-gcp gives a GCE instance, and its zone. false while the
// instance does not run yet.
func (s *Server) Kubelet(name string) (labels map[string]string, taints []corev1.Taint, providerID, zone string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, i := s.find(name)
	if i == nil || i.status == "" {
		return nil, nil, "", "", false
	}
	t := s.templates[lastSegment(i.template)]
	script := metadataItems(t)["startup-script"]
	labels, taints = kubeletFlags(script)
	return labels, taints, "gce://" + Project + "/" + i.zone + "/" + i.name, i.zone, true
}

// find is the instance of the name, one not being deleted first (names are
// unique in a zone only).
func (s *Server) find(name string) (*group, *instance) {
	var fg *group
	var fi *instance
	for _, g := range s.groups {
		for _, i := range g.instances {
			if i.name == name && (fi == nil || fi.action == "DELETING") {
				fg, fi = g, i
			}
		}
	}
	return fg, fi
}

// at is the instance of the name in the zone, one not being deleted first,
// and its group (nil for a VM no group made).
func (s *Server) at(zone, name string) (*group, *instance) {
	var fg *group
	var fi *instance
	consider := func(g *group, i *instance) {
		if i.name == name && i.zone == zone && (fi == nil || fi.action == "DELETING") {
			fg, fi = g, i
		}
	}
	for _, g := range s.groups {
		for _, i := range g.instances {
			consider(g, i)
		}
	}
	for _, i := range s.vms {
		consider(nil, i)
	}
	return fg, fi
}

// zoneFor is the zone a group's next instance goes to.
func (s *Server) zoneFor(g *group) string {
	if g.region == "" {
		return g.zone
	}
	best, n := "", -1
	for _, z := range g.zones {
		c := 0
		for _, i := range g.instances {
			if i.zone == z && i.action != "DELETING" {
				c++
			}
		}
		if n < 0 || c < n {
			best, n = z, c
		}
	}
	return best
}

// attempt tries to create the instance's VM once.
func (s *Server) attempt(i *instance) {
	switch {
	case s.exhausted[i.zone]:
		i.errors = []attemptError{{"ZONE_RESOURCE_POOL_EXHAUSTED", fmt.Sprintf(
			"The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", Project, i.zone)}}
	case s.quota > 0:
		s.quota--
		i.errors = []attemptError{{"QUOTA_EXCEEDED", fmt.Sprintf("Quota 'CPUS' exceeded.  Limit: 24.0 in region %s.", regionOf(i.zone))}}
	default:
		i.errors, i.status, i.created = nil, "PROVISIONING", s.clock.Now()
	}
}

func (s *Server) id() int64 {
	s.next++
	return 4_718_000_000_000_000_000 + s.next*7919
}

// kubeletFlags reads --node-labels and --register-with-taints from a
// script, as the kubelet parses them (the last of each wins).
func kubeletFlags(script string) (map[string]string, []corev1.Taint) {
	labels := map[string]string{}
	var taints []corev1.Taint
	for _, w := range strings.FieldsFunc(script, func(r rune) bool { return strings.ContainsRune(" \t\r\n\"'", r) }) {
		if v, ok := strings.CutPrefix(w, "--node-labels="); ok {
			labels = map[string]string{}
			for _, kv := range strings.Split(v, ",") {
				if k, val, ok := strings.Cut(kv, "="); ok {
					labels[k] = val
				}
			}
		}
		if v, ok := strings.CutPrefix(w, "--register-with-taints="); ok {
			taints = nil
			for _, t := range strings.Split(v, ",") {
				kv, effect, _ := strings.Cut(t, ":")
				k, val, _ := strings.Cut(kv, "=")
				taints = append(taints, corev1.Taint{Key: k, Value: val, Effect: corev1.TaintEffect(effect)})
			}
		}
	}
	return labels, taints
}

// startupScript is a node's boot script starting the kubelet with the
// labels and taints, as a self-managed node's template carries it.
func startupScript(labels map[string]string, taints []corev1.Taint) string {
	var l, t []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		l = append(l, k+"="+labels[k])
	}
	for _, x := range taints {
		t = append(t, x.ToString())
	}
	args := ""
	if len(l) > 0 {
		args += " --node-labels=" + strings.Join(l, ",")
	}
	if len(t) > 0 {
		args += " --register-with-taints=" + strings.Join(t, ",")
	}
	return "#!/bin/bash\nset -euo pipefail\ncat >/etc/default/kubelet <<EOF\nKUBELET_EXTRA_ARGS=\"" + strings.TrimSpace(args) +
		"\"\nEOF\nkubeadm join --config /etc/kubernetes/join.yaml\n"
}

func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

func lastSegment(url string) string { return url[strings.LastIndex(url, "/")+1:] }

func base36(n int64, width int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	out := make([]byte, width)
	for i := width - 1; i >= 0; i-- {
		out[i] = digits[n%36]
		n /= 36
	}
	return string(out)
}
