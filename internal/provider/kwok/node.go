package kwok

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// What the simulated machines run, as the sandbox's fixture Nodes say.
const (
	kubeletVersion   = "v1.34.4"
	containerRuntime = "containerd://2.1.4"
	defaultMaxPods   = 110
	// The OS disk: 128 GiB, of which the kubelet leaves this much to pods.
	diskCapacity    = "128Gi"
	diskAllocatable = "119703055367"
)

// AnnotationKwokNode marks a Node for kwok. The sandbox's kwok plays every
// Node (--manage-all-nodes); the annotation makes the provider's Nodes look
// like the fixture's, and lets a kwok started with kwok's usual
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake play them
// too.
const AnnotationKwokNode = "kwok.x-k8s.io/node"

// nodeSpec is what a machine's Node is made of.
type nodeSpec struct {
	machine  provider.Machine
	nodeName string
	template *v1alpha1.NodeTemplate
	typ      catalog.Type
	// registered, when set, is the pool the Node is registered to already
	// (Options.Registered).
	registered *v1alpha1.NodePool
}

// build returns the Node the machine's kubelet registers: the template's
// labels and taints as they were at launch (startup taints too),
// contract.TaintUnregistered, the labels and annotations every
// provider writes, and the capacity of its instance type.
func (s *nodeSpec) build() *corev1.Node {
	m, t := s.machine, s.template
	nodeLabels := maps.Clone(t.Labels)
	if nodeLabels == nil {
		nodeLabels = map[string]string{}
	}
	maps.Copy(nodeLabels, map[string]string{
		provider.LabelNodePool:     m.Pool,
		provider.LabelCapacityType: string(m.Capacity),
		provider.LabelInstanceType: m.InstanceType,
		provider.LabelZone:         m.Zone,
		provider.LabelRegion:       s.typ.Region,
		corev1.LabelHostname:       s.nodeName,
		corev1.LabelOSStable:       "linux",
		corev1.LabelArchStable:     "amd64",
	})
	pods := int64(defaultMaxPods)
	if t.Kubelet != nil && t.Kubelet.MaxPods != nil {
		pods = int64(*t.Kubelet.MaxPods)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              s.typ.CPU,
		corev1.ResourceMemory:           s.typ.Memory,
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse(diskCapacity),
	}
	allocatable := s.typ.Allocatable.DeepCopy()
	allocatable[corev1.ResourcePods] = capacity[corev1.ResourcePods]
	allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse(diskAllocatable)
	osImage := "Ubuntu 22.04.5 LTS"
	if s.typ.Cloud == catalog.AWS {
		osImage = "Amazon Linux 2023.8.20260801"
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   s.nodeName,
			Labels: nodeLabels,
			Annotations: map[string]string{
				provider.AnnotationImage:        m.Image,
				provider.AnnotationTemplateHash: provider.TemplateHash(t),
				AnnotationKwokNode:              "fake",
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: m.ProviderID,
			// As every provider launches it: the controller registers the
			// Node (docs/design/registration.md) and lifts this taint.
			Taints: append(append(slices.Clone(t.Taints), t.StartupTaints...), provider.Unregistered),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: kubeletVersion, ContainerRuntimeVersion: containerRuntime,
				OperatingSystem: "linux", Architecture: "amd64", OSImage: osImage,
			},
		},
	}
	if s.registered != nil {
		provider.Apply(n, s.registered, "", m.Created)
	}
	return n
}

// machineOf reads a registered machine back from its Node, and says whether
// the provider made the Node at all.
func machineOf(n *corev1.Node) (*provider.Machine, bool) {
	pool := n.Labels[provider.LabelNodePool]
	if pool == "" || !strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) {
		return nil, false
	}
	state := provider.StateRunning
	if n.DeletionTimestamp != nil {
		state = provider.StateDeleting
	}
	return &provider.Machine{
		Name:         strings.TrimPrefix(n.Spec.ProviderID, ProviderIDPrefix),
		NodeName:     n.Name,
		Pool:         pool,
		ProviderID:   n.Spec.ProviderID,
		InstanceType: n.Labels[provider.LabelInstanceType],
		Capacity:     v1alpha1.CapacityType(n.Labels[provider.LabelCapacityType]),
		Zone:         n.Labels[provider.LabelZone],
		Image:        n.Annotations[provider.AnnotationImage],
		// When the Node registered: the machine's launch is not recorded.
		Created: n.CreationTimestamp.Time,
		State:   state,
	}, true
}

// instanceType returns the first of the template's instance types sold as
// capacity. Like a cloud validating a request, it refuses the whole template
// when it names one type the catalogue does not know.
func (p *Provider) instanceType(t *v1alpha1.NodeTemplate, capacity v1alpha1.CapacityType) (catalog.Type, error) {
	names := t.InstanceTypes
	if len(names) == 0 {
		names = []string{p.opts.DefaultInstanceType}
	}
	var chosen *catalog.Type
	for _, name := range names {
		typ, ok := catalog.Lookup(name)
		if !ok {
			return catalog.Type{}, &provider.Error{
				Code: provider.CodeInvalidTemplate,
				Message: "instance type " + name + " does not exist; the kwok provider knows the sizes in internal/provider/catalog, " +
					"such as Standard_D4s_v5 and m6i.xlarge",
			}
		}
		if chosen == nil && typ.Offers(capacity) {
			chosen = &typ
		}
	}
	if chosen == nil {
		return catalog.Type{}, &provider.Error{
			Code:    provider.CodeInvalidTemplate,
			Message: "none of the instance types " + strings.Join(names, ", ") + " is sold as " + string(capacity),
		}
	}
	return *chosen, nil
}

// nextZone returns the zone of the pool's next machine: the template's, or
// the next in turn. p.mu must be held.
func (p *Provider) nextZone(pool string, t *v1alpha1.NodeTemplate, typ catalog.Type) string {
	if zone := t.Labels[provider.LabelZone]; zone != "" {
		return zone
	}
	zones := p.opts.Zones
	if len(zones) == 0 {
		zones = regionZones(typ)
	}
	i := p.zone[pool]
	p.zone[pool] = i + 1
	return zones[i%len(zones)]
}

// regionZones returns the three zones of the region the type's prices are
// from, spelled as its cloud spells them.
func regionZones(typ catalog.Type) []string {
	if typ.Cloud == catalog.AWS {
		return []string{typ.Region + "a", typ.Region + "b", typ.Region + "c"}
	}
	return []string{typ.Region + "-1", typ.Region + "-2", typ.Region + "-3"}
}

// newName returns pool-xxxxx, five random lowercase letters and digits as
// Karpenter names its NodeClaims, unused by any machine that has not
// registered. p.mu must be held. (A name a registered machine already has
// is one in 60 million for each; its Node's creation would fail, and the
// machine with it.)
func (p *Provider) newName(pool string) string {
	for {
		if name := provider.NewName(pool); p.machines[name] == nil {
			return name
		}
	}
}
