package feed

import (
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// selector is a request's namespace, label and field selectors.
type selector struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

func (s *Server) parseSelector(r *http.Request, req request) (selector, error) {
	q := r.URL.Query()
	sel := selector{namespace: req.namespace, labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if v := q.Get("labelSelector"); v != "" {
		if sel.labels, err = labels.Parse(v); err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
	}
	if v := q.Get("fieldSelector"); v != "" {
		if sel.fields, err = fields.ParseSelector(v); err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
		zero, err := s.scheme.New(req.kind.gvr.GroupVersion().WithKind(req.kind.kind))
		if err != nil {
			return sel, err
		}
		known := fieldsOf(zero)
		for _, f := range sel.fields.Requirements() {
			if _, ok := known[f.Field]; !ok {
				return sel, apierrors.NewBadRequest("field label not supported: " + f.Field)
			}
		}
	}
	return sel, nil
}

func (sel selector) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if sel.namespace != "" && m.GetNamespace() != sel.namespace {
		return false
	}
	return sel.labels.Matches(labels.Set(m.GetLabels())) && sel.fields.Matches(fieldsOf(obj))
}

// fieldsOf is what a field selector may name, as the API server allows it
// for each kind sluice selects on.
func fieldsOf(obj runtime.Object) fields.Set {
	set := fields.Set{}
	if m, err := meta.Accessor(obj); err == nil {
		set["metadata.name"], set["metadata.namespace"] = m.GetName(), m.GetNamespace()
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"], set["status.phase"] = o.Spec.NodeName, string(o.Status.Phase)
		set["spec.schedulerName"], set["spec.restartPolicy"] = o.Spec.SchedulerName, string(o.Spec.RestartPolicy)
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Event:
		set["involvedObject.kind"], set["involvedObject.name"] = o.InvolvedObject.Kind, o.InvolvedObject.Name
		set["involvedObject.namespace"], set["involvedObject.uid"] = o.InvolvedObject.Namespace, string(o.InvolvedObject.UID)
		set["reason"], set["type"] = o.Reason, o.Type
	}
	return set
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, req request) {
	s.mu.Lock()
	obj, ok := req.kind.objects[req.kind.key(req.namespace, req.name)]
	s.mu.Unlock()
	if !ok {
		s.fail(w, r, apierrors.NewNotFound(req.kind.gvr.GroupResource(), req.name))
		return
	}
	s.write(w, r, req.kind.builtin, http.StatusOK, obj)
}

// list answers from a snapshot taken at the first page, so the pages of
// one list agree with each other whatever is written meanwhile.
func (s *Server) list(w http.ResponseWriter, r *http.Request, req request) {
	sel, err := s.parseSelector(r, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	token := q.Get("continue")
	s.mu.Lock()
	var (
		items []runtime.Object
		rv    string
	)
	if token == "" {
		for _, key := range sortedKeys(req.kind.objects) {
			if obj := req.kind.objects[key]; sel.matches(obj) {
				items = append(items, obj)
			}
		}
		rv = strconv.FormatUint(s.rv, 10)
	} else {
		snap, ok := s.snapshots[token]
		if !ok {
			s.mu.Unlock()
			s.fail(w, r, apierrors.NewResourceExpired("the continue token is not one the feed gave"))
			return
		}
		delete(s.snapshots, token)
		items, rv = snap[1:], snapRV(snap[0])
	}
	next := ""
	if limit > 0 && len(items) > limit {
		next = rv + "-" + strconv.Itoa(len(s.snapshots)) + "-" + strconv.Itoa(len(items))
		for s.snapshots[next] != nil {
			next += "+"
		}
		s.snapshots[next] = append([]runtime.Object{rvMarker(rv)}, items[limit:]...)
		items = items[:limit]
	}
	s.mu.Unlock()

	list, err := s.scheme.New(req.kind.gvr.GroupVersion().WithKind(req.kind.kind + "List"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list.GetObjectKind().SetGroupVersionKind(req.kind.gvr.GroupVersion().WithKind(req.kind.kind + "List"))
	if err := meta.SetList(list, items); err != nil {
		s.fail(w, r, err)
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(rv)
	lm.SetContinue(next)
	s.write(w, r, req.kind.builtin, http.StatusOK, list)
}

// rvMarker carries a snapshot's resource version as its first element.
func rvMarker(rv string) runtime.Object {
	return &metav1.Status{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
}

func snapRV(obj runtime.Object) string { return obj.(*metav1.Status).ResourceVersion }

// watcher is one open watch.
type watcher struct {
	kind   *kind
	sel    selector
	events chan event
	closed bool
}

// watchBuffer is how far a watch may fall behind before it is closed; the
// client then watches again from the last version it saw, and the history
// replays what it missed.
const watchBuffer = 4096

func (s *Server) watch(w http.ResponseWriter, r *http.Request, req request) {
	sel, err := s.parseSelector(r, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	from, _ := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	timeout := 30 * time.Minute
	if secs, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && secs > 0 {
		timeout = time.Duration(secs) * time.Second
	}
	wt, backlog := s.subscribe(req, sel, from)
	defer func() {
		s.mu.Lock()
		delete(s.watchers, wt)
		s.mu.Unlock()
	}()

	info := s.serializerFor(r, req.kind.builtin)
	mediaType := info.MediaType
	if info.StreamSerializer == nil {
		s.fail(w, r, apierrors.NewBadRequest("no streaming serializer for "+mediaType))
		return
	}
	if mediaType == runtime.ContentTypeProtobuf {
		mediaType += ";stream=watch"
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	frames := info.StreamSerializer.NewFrameWriter(w)
	send := func(ev event) bool {
		raw, err := runtime.Encode(info.Serializer, ev.obj)
		if err != nil {
			return false
		}
		out := &metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: raw}}
		if err := info.StreamSerializer.Encode(out, frames); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if flusher != nil {
		flusher.Flush()
	}
	for _, ev := range backlog {
		if !send(ev) {
			return
		}
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	for {
		select {
		case ev, ok := <-wt.events:
			if !ok || !send(ev) {
				return
			}
		case <-end.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// subscribe opens a watch of req's kind from resource version from (now,
// when 0), with the changes since that it missed.
func (s *Server) subscribe(req request, sel selector, from uint64) (*watcher, []event) {
	wt := &watcher{kind: req.kind, sel: sel, events: make(chan event, watchBuffer)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if from == 0 {
		from = s.rv
	}
	var backlog []event
	for _, ev := range s.history {
		if ev.rv > from && ev.kind == req.kind && sel.matches(ev.obj) {
			backlog = append(backlog, ev)
		}
	}
	s.watchers[wt] = struct{}{}
	return wt, backlog
}

// notify records a change and hands it to every watch that selects it.
// The caller holds s.mu.
func (s *Server) notify(k *kind, typ watch.EventType, obj runtime.Object, rv uint64) {
	ev := event{rv: rv, kind: k, typ: typ, obj: obj}
	s.history = append(s.history, ev)
	for wt := range s.watchers {
		if wt.closed || wt.kind != k || !wt.sel.matches(obj) {
			continue
		}
		select {
		case wt.events <- ev:
		default:
			wt.closed = true
			close(wt.events)
		}
	}
}
