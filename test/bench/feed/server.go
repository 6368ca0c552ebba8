package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// kind is one resource the Server serves, and the objects it holds of it.
type kind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	status     bool // writes to the object leave its status alone; /status writes only it
	generation bool // a change of spec bumps metadata.generation
	builtin    bool // served in protobuf too
	objects    map[string]runtime.Object
}

func (k *kind) key(ns, name string) string {
	if k.namespaced {
		return ns + "/" + name
	}
	return name
}

// served is what the Server serves: what sluice's controller, status and
// doctor read and write.
var served = []kind{
	{gvr: corev1.SchemeGroupVersion.WithResource("nodes"), kind: "Node", status: true},
	{gvr: corev1.SchemeGroupVersion.WithResource("pods"), kind: "Pod", namespaced: true, status: true},
	{gvr: corev1.SchemeGroupVersion.WithResource("namespaces"), kind: "Namespace", status: true},
	{gvr: corev1.SchemeGroupVersion.WithResource("events"), kind: "Event", namespaced: true},
	{gvr: corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), kind: "PersistentVolumeClaim", namespaced: true, status: true},
	{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), kind: "ConfigMap", namespaced: true},
	{gvr: appsv1.SchemeGroupVersion.WithResource("deployments"), kind: "Deployment", namespaced: true, status: true, generation: true},
	{gvr: appsv1.SchemeGroupVersion.WithResource("replicasets"), kind: "ReplicaSet", namespaced: true, status: true, generation: true},
	{gvr: appsv1.SchemeGroupVersion.WithResource("statefulsets"), kind: "StatefulSet", namespaced: true, status: true, generation: true},
	{gvr: appsv1.SchemeGroupVersion.WithResource("daemonsets"), kind: "DaemonSet", namespaced: true, status: true, generation: true},
	{gvr: batchv1.SchemeGroupVersion.WithResource("jobs"), kind: "Job", namespaced: true, status: true, generation: true},
	{gvr: policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), kind: "PodDisruptionBudget", namespaced: true, status: true, generation: true},
	{gvr: coordinationv1.SchemeGroupVersion.WithResource("leases"), kind: "Lease", namespaced: true},
	{gvr: eventsv1.SchemeGroupVersion.WithResource("events"), kind: "Event", namespaced: true},
	{gvr: schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), kind: "PriorityClass"},
	{gvr: v1alpha1.SchemeGroupVersion.WithResource("nodepools"), kind: "NodePool", status: true, generation: true},
}

// event is one change, kept so a watch from an older resource version
// replays what it missed.
type event struct {
	rv   uint64
	kind *kind
	typ  watch.EventType
	obj  runtime.Object
}

// Server is the in-memory API server. Build it with New, give it objects
// with Add, then Start it.
type Server struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	clock  clock.PassiveClock

	mu        sync.Mutex
	rv        uint64
	kinds     map[schema.GroupVersionResource]*kind
	byGVK     map[schema.GroupVersionKind]*kind
	history   []event
	watchers  map[*watcher]struct{}
	snapshots map[string][]runtime.Object
	requests  map[string]int
	nextUID   uint64

	listener net.Listener
	http     *http.Server
}

// New returns an empty Server reading time from clk.
func New(clk clock.PassiveClock) (*Server, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	s := &Server{scheme: scheme, codecs: serializer.NewCodecFactory(scheme), clock: clk, rv: 1,
		kinds: map[schema.GroupVersionResource]*kind{}, byGVK: map[schema.GroupVersionKind]*kind{},
		watchers: map[*watcher]struct{}{}, snapshots: map[string][]runtime.Object{}, requests: map[string]int{}}
	for _, k := range served {
		k := k
		k.builtin = k.gvr.Group != v1alpha1.SchemeGroupVersion.Group
		k.objects = map[string]runtime.Object{}
		s.kinds[k.gvr] = &k
		s.byGVK[k.gvr.GroupVersion().WithKind(k.kind)] = &k
	}
	return s, nil
}

// Add stores objects as they are, each at a new resource version, without
// an event: what the cluster held before anyone watched.
func (s *Server) Add(objs ...runtime.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, obj := range objs {
		k, err := s.kindOf(obj)
		if err != nil {
			return err
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		s.rv++
		m.SetResourceVersion(strconv.FormatUint(s.rv, 10))
		if m.GetUID() == "" {
			m.SetUID(s.uid())
		}
		k.objects[k.key(m.GetNamespace(), m.GetName())] = obj
	}
	return nil
}

// Mutate changes one stored object as a person's write would: change is
// handed a copy, and the result is stored and sent to every watch, its
// generation bumped when its spec changed.
func (s *Server) Mutate(obj runtime.Object, change func(runtime.Object)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	old, ok := k.objects[k.key(m.GetNamespace(), m.GetName())]
	if !ok {
		return apierrors.NewNotFound(k.gvr.GroupResource(), m.GetName())
	}
	next := old.DeepCopyObject()
	change(next)
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return err
	}
	nextJSON, err := json.Marshal(next)
	if err != nil {
		return err
	}
	_, err = s.store(k, old, oldJSON, nextJSON, "", false)
	return err
}

// Get returns the stored object of obj's kind, namespace and name.
func (s *Server) Get(obj runtime.Object) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.kindOf(obj)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	stored, ok := k.objects[k.key(m.GetNamespace(), m.GetName())]
	if !ok {
		return nil, apierrors.NewNotFound(k.gvr.GroupResource(), m.GetName())
	}
	return stored, nil
}

// Each calls fn with every object the Server holds, of every kind. fn must
// not change them.
func (s *Server) Each(fn func(runtime.Object)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kinds {
		for _, obj := range k.objects {
			fn(obj)
		}
	}
}

// Requests returns how many requests of each verb and resource the Server
// has answered, keyed "verb resource[/subresource]".
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// Start serves on a free loopback port until Stop.
func (s *Server) Start() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.listener = l
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 0}
	go func() { _ = s.http.Serve(l) }()
	return nil
}

// Stop closes every connection.
func (s *Server) Stop() {
	if s.http != nil {
		_ = s.http.Close()
	}
}

// URL is where the Server answers.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// RESTConfig is a client configuration for the Server.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{Host: s.URL(), QPS: -1}
}

// Kubeconfig is a kubeconfig file's contents naming the Server.
func (s *Server) Kubeconfig() []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: feed
  cluster: {server: %q}
users:
- name: feed
  user: {}
contexts:
- name: feed
  context: {cluster: feed, user: feed}
current-context: feed
`, s.URL()))
}

func (s *Server) kindOf(obj runtime.Object) (*kind, error) {
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	for _, gvk := range gvks {
		if k, ok := s.byGVK[gvk]; ok {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return k, nil
		}
	}
	return nil, fmt.Errorf("the feed does not serve %v", gvks)
}

func (s *Server) uid() types.UID {
	s.nextUID++
	return types.UID(fmt.Sprintf("00000000-feed-0000-0000-%012d", s.nextUID))
}

func (s *Server) count(verb string, k *kind, sub string) {
	name := verb + " " + k.gvr.Resource
	if sub != "" {
		name += "/" + sub
	}
	s.mu.Lock()
	s.requests[name]++
	s.mu.Unlock()
}

// serializerFor is the serializer the request's Accept header asks for:
// protobuf for built-in kinds when the client takes it, JSON otherwise.
func (s *Server) serializerFor(r *http.Request, builtin bool) runtime.SerializerInfo {
	want := runtime.ContentTypeJSON
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt == runtime.ContentTypeProtobuf && builtin {
			want = mt
			break
		}
		if mt == runtime.ContentTypeJSON || mt == "*/*" {
			break
		}
	}
	info, _ := runtime.SerializerInfoForMediaType(s.codecs.SupportedMediaTypes(), want)
	return info
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, builtin bool, code int, obj runtime.Object) {
	info := s.serializerFor(r, builtin)
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(code)
	_ = info.Serializer.Encode(obj, w)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	s.write(w, r, true, int(st.Code), &st)
}

func readBody(r *http.Request) ([]byte, error) {
	defer func() { _ = r.Body.Close() }()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return data, nil
}

// sortedKeys returns the keys of objects in order, as the API server lists.
func sortedKeys(objects map[string]runtime.Object) []string {
	keys := make([]string, 0, len(objects))
	for key := range objects {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}
