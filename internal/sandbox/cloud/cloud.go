// Package cloud plays the cloud for the sandbox. Every simulated node gets a
// metadata-service emulator of its provider (Azure Scheduled Events, AWS
// IMDSv2 or GCP metadata, by its providerID) on loopback, and an agent
// holding exactly the privilege a real one has: a token bound to the node's
// sluice-sandbox-agent DaemonSet pod, checked by the chart's admission policy
// (renamed, so the chart itself can be installed beside it). Inject
// announces an event the way the platform would, and then carries it out:
// at its time (or as soon as it is approved) a preempted or terminated node
// disappears, a rebooted or redeployed one goes NotReady for a while and
// comes back, and the event ends.
package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/agent"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// Namespace is where the sandbox installs sluice's agents.
const Namespace = "sluice-system"

// agentName names the sandbox's agents' DaemonSet, service account and
// policy: not the chart's sluice-agent, so `helm install` of the chart into
// the sandbox (as the README does) finds none of its objects taken.
const agentName = "sluice-sandbox-agent"

// Cloud runs the emulators and agents of every node.
type Cloud struct {
	client kubernetes.Interface
	config *rest.Config
	clock  clock.WithTicker
	log    *slog.Logger

	mu       sync.Mutex
	machines map[string]*machine
}

// machine is one node's side of the cloud.
type machine struct {
	node     string
	source   maintenance.Source
	vm       string
	azure    *azure.Server
	aws      *aws.Server
	gcp      *gcp.Server
	endpoint string
	stop     func()
	events   map[string]context.CancelFunc // the platform's pending actions, by event ID
}

// New returns a cloud for the sandbox behind config.
func New(client kubernetes.Interface, config *rest.Config, clk clock.WithTicker, log *slog.Logger) *Cloud {
	return &Cloud{client: client, config: config, clock: clk, log: log, machines: map[string]*machine{}}
}

// Run installs the agents' privileges and DaemonSet, then gives every node
// (present and future) its emulator and agent, until ctx ends.
func (c *Cloud) Run(ctx context.Context) error {
	if err := c.install(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(Namespace))
	pods := factory.Core().V1().Pods().Informer()
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { c.podChanged(ctx, obj) },
	})
	if err != nil {
		return fmt.Errorf("watching agent pods: %w", err)
	}
	nodeFactory := informers.NewSharedInformerFactory(c.client, 0)
	_, err = nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.retire(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	nodeFactory.Shutdown()
	c.mu.Lock()
	for name := range c.machines {
		c.retireLocked(name)
	}
	c.mu.Unlock()
	return nil
}

// install applies the chart's agent policy and a DaemonSet of agent pods, so
// every node has a pod whose token names the node.
func (c *Cloud) install(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	policy, err := chart.AgentPolicyNamed(Namespace, agentName)
	if err != nil {
		return err
	}
	if err := sandbox.ApplyManifests(ctx, c.config, policy); err != nil {
		return fmt.Errorf("installing the agent's policy: %w", err)
	}
	labels := map[string]string{"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "sandbox-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: agentName, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: agentName,
					// The agents themselves run in the sandbox's supervisor; these pods give them their identity.
					Containers:  []corev1.Container{{Name: "agent", Image: "ghcr.io/sluice-dev/sluice:sandbox", Args: []string{"agent"}}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	if _, err := c.client.AppsV1().DaemonSets(Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the agent DaemonSet: %w", err)
	}
	return nil
}

// podChanged starts a node's machine once its agent pod is bound and running.
// Other pods in the namespace (a chart's, installed beside) are not its agents.
func (c *Cloud) podChanged(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.ServiceAccountName != agentName || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return
	}
	c.mu.Lock()
	_, exists := c.machines[pod.Spec.NodeName]
	c.mu.Unlock()
	if exists {
		return
	}
	if err := c.start(ctx, pod); err != nil {
		c.log.Error("starting the node's metadata service and agent", "node", pod.Spec.NodeName, "err", err)
	}
}

// start serves the node's emulator and runs its agent.
func (c *Cloud) start(ctx context.Context, pod *corev1.Pod) error {
	node, err := c.client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node: %w", err)
	}
	if strings.HasPrefix(node.Spec.ProviderID, kwok.ProviderIDPrefix) {
		// A machine of the kwok provider (a NodePool's): no cloud metadata
		// service stands behind it.
		c.log.Debug("no metadata service for a kwok provider's node", "node", node.Name)
		return nil
	}
	source, err := agent.CloudOf(node.Spec.ProviderID)
	if err != nil {
		return err
	}
	m := &machine{node: node.Name, source: source, events: map[string]context.CancelFunc{}}
	var handler http.Handler
	switch source {
	case maintenance.SourceAzure:
		if m.vm, err = azure.VMName(node.Spec.ProviderID); err != nil {
			return err
		}
		m.azure = azure.NewServer()
		handler = m.azure
	case maintenance.SourceAWS:
		m.aws = aws.NewServer(c.clock)
		handler = m.aws
	case maintenance.SourceGCP:
		m.gcp = gcp.NewServer(c.clock)
		handler = m.gcp
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	m.endpoint = "http://" + ln.Addr().String()

	cfg, err := sandbox.AgentConfig(ctx, c.client, c.config, Namespace, agentName, pod, 24*time.Hour)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("minting the agent's token: %w", err)
	}
	cfg.QPS, cfg.Burst = 5, 10
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("building the agent's client: %w", err)
	}
	watcher, err := agent.NewWatcher(source, m.endpoint, node.Spec.ProviderID, c.clock, maintenance.DefaultPollInterval, 2*time.Second)
	if err != nil {
		_ = srv.Close()
		return err
	}
	approver, _ := watcher.(maintenance.Approver)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	a := agent.New(client, c.log.With("component", "agent"), agent.Config{Node: node.Name, Source: source, Watcher: watcher, Approver: approver, CordonInvoluntary: true})
	go func() {
		defer close(done)
		if err := a.Run(actx); err != nil {
			c.log.Error("agent stopped", "node", node.Name, "err", err)
		}
	}()
	m.stop = func() { cancel(); <-done; _ = srv.Close() }

	c.mu.Lock()
	defer c.mu.Unlock()
	if _, exists := c.machines[node.Name]; exists {
		go m.stop()
		return nil
	}
	c.machines[node.Name] = m
	c.log.Info("node metadata service and agent up", "node", node.Name, "cloud", source, "endpoint", m.endpoint)
	return nil
}

// retire stops a vanished node's machine.
func (c *Cloud) retire(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retireLocked(name)
}

func (c *Cloud) retireLocked(name string) {
	m := c.machines[name]
	if m == nil {
		return
	}
	delete(c.machines, name)
	for _, cancel := range m.events {
		cancel()
	}
	go m.stop()
}

// Machines lists the nodes with an emulator, with its cloud and address.
func (c *Cloud) Machines() []MachineInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]MachineInfo, 0, len(c.machines))
	for _, m := range c.machines {
		out = append(out, MachineInfo{Node: m.node, Cloud: m.source, Endpoint: m.endpoint})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// MachineInfo describes one node's emulator.
type MachineInfo struct {
	Node     string             `json:"node"`
	Cloud    maintenance.Source `json:"cloud"`
	Endpoint string             `json:"endpoint"`
}

func (c *Cloud) machine(node string) (*machine, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.machines[node]; m != nil {
		return m, nil
	}
	names := make([]string, 0, len(c.machines))
	for n := range c.machines {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no simulated machine for node %q; nodes with one: %s", node, strings.Join(names, ", "))
}
