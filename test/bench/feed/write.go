package feed

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
)

// decodeBody reads a create's or an update's object, in whichever encoding
// the client sent, as JSON.
func (s *Server) decodeBody(r *http.Request, req request) ([]byte, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	obj, _, err := s.codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if k, err := s.kindOf(obj); err != nil || k != req.kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a %s", req.kind.kind))
	}
	return json.Marshal(obj)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, req request) {
	data, err := s.decodeBody(r, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		s.fail(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	md, _ := doc["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		doc["metadata"] = md
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name, _ := md["name"].(string)
	if name == "" {
		prefix, _ := md["generateName"].(string)
		name = prefix + strconv.FormatUint(s.nextUID+1, 36)
		md["name"] = name
	}
	if req.kind.namespaced {
		md["namespace"] = req.namespace
	}
	if _, ok := req.kind.objects[req.kind.key(req.namespace, name)]; ok {
		s.fail(w, r, apierrors.NewAlreadyExists(req.kind.gvr.GroupResource(), name))
		return
	}
	md["uid"] = string(s.uid())
	md["creationTimestamp"] = s.clock.Now().UTC().Format("2006-01-02T15:04:05Z")
	if req.kind.generation {
		md["generation"] = 1
	}
	delete(md, "resourceVersion")
	obj, err := s.commit(req.kind, doc, watch.Added)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, req.kind.builtin, http.StatusCreated, obj)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, req request) {
	data, err := s.decodeBody(r, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, oldJSON, err := s.current(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	obj, err := s.store(req.kind, old, oldJSON, data, req.sub, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, req.kind.builtin, http.StatusOK, obj)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, req request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, oldJSON, err := s.current(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	patched, err := s.applyPatch(types.PatchType(r.Header.Get("Content-Type")), req.kind, old, oldJSON, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	obj, err := s.store(req.kind, old, oldJSON, patched, req.sub, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, req.kind.builtin, http.StatusOK, obj)
}

func (s *Server) applyPatch(pt types.PatchType, k *kind, old runtime.Object, oldJSON, body []byte) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch pt {
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(oldJSON, body)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(body); err == nil {
			out, err = p.Apply(oldJSON)
		}
	case types.StrategicMergePatchType:
		if !k.builtin {
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the feed does not take patches of type " + string(pt)}}
		}
		out, err = strategicpatch.StrategicMergePatch(oldJSON, body, old)
	default:
		// Server-side apply is the API server's field-manager machinery;
		// the feed does not pretend to it.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the feed does not take patches of type " + string(pt)}}
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request, req request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, oldJSON, err := s.current(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	m, _ := meta.Accessor(old)
	if len(m.GetFinalizers()) == 0 {
		s.rv++
		gone := old.DeepCopyObject()
		gm, _ := meta.Accessor(gone)
		gm.SetResourceVersion(strconv.FormatUint(s.rv, 10))
		delete(req.kind.objects, req.kind.key(req.namespace, req.name))
		s.notify(req.kind, watch.Deleted, gone, s.rv)
		s.write(w, r, req.kind.builtin, http.StatusOK, gone)
		return
	}
	if m.GetDeletionTimestamp() != nil {
		s.write(w, r, req.kind.builtin, http.StatusAccepted, old)
		return
	}
	var doc map[string]any
	_ = json.Unmarshal(oldJSON, &doc)
	md := doc["metadata"].(map[string]any)
	md["deletionTimestamp"] = s.clock.Now().UTC().Format("2006-01-02T15:04:05Z")
	md["deletionGracePeriodSeconds"] = 0
	obj, err := s.commit(req.kind, doc, watch.Modified)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, req.kind.builtin, http.StatusAccepted, obj)
}

// current is the stored object a write changes, and its JSON. The caller
// holds s.mu.
func (s *Server) current(req request) (runtime.Object, []byte, error) {
	old, ok := req.kind.objects[req.kind.key(req.namespace, req.name)]
	if !ok {
		return nil, nil, apierrors.NewNotFound(req.kind.gvr.GroupResource(), req.name)
	}
	data, err := json.Marshal(old)
	return old, data, err
}

// store writes next over old as the API server would: a write to the
// object leaves a status subresource alone and a /status write changes
// only the status; what the server owns in metadata stays; a stale
// resourceVersion is a conflict; a changed spec bumps the generation; an
// object being deleted whose last finalizer goes is gone. The caller holds
// s.mu.
func (s *Server) store(k *kind, old runtime.Object, oldJSON, nextJSON []byte, sub string, checkVersion bool) (runtime.Object, error) {
	var before, after map[string]any
	if err := json.Unmarshal(oldJSON, &before); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(nextJSON, &after); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	bm, _ := before["metadata"].(map[string]any)
	am, _ := after["metadata"].(map[string]any)
	if am == nil {
		am = map[string]any{}
	}
	if rv, _ := am["resourceVersion"].(string); checkVersion && rv != "" && rv != bm["resourceVersion"] {
		m, _ := meta.Accessor(old)
		return nil, apierrors.NewConflict(k.gvr.GroupResource(), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	switch {
	case sub == "status":
		before["status"] = after["status"]
		after, am = before, bm
	case sub != "":
		return nil, apierrors.NewBadRequest("the feed writes no subresource " + sub)
	case k.status:
		after["status"] = before["status"]
	}
	for _, owned := range []string{"uid", "creationTimestamp", "deletionTimestamp", "name", "namespace", "generation"} {
		if v, ok := bm[owned]; ok {
			am[owned] = v
		} else {
			delete(am, owned)
		}
	}
	if k.generation && sub == "" && !reflect.DeepEqual(before["spec"], after["spec"]) {
		gen, _ := bm["generation"].(float64)
		am["generation"] = gen + 1
	}
	after["metadata"] = am
	if am["deletionTimestamp"] != nil && len(asSlice(am["finalizers"])) == 0 {
		s.rv++
		delete(k.objects, k.key(str(am["namespace"]), str(am["name"])))
		obj, err := s.decode(k, after)
		if err != nil {
			return nil, err
		}
		s.notify(k, watch.Deleted, obj, s.rv)
		return obj, nil
	}
	return s.commit(k, after, watch.Modified)
}

// commit stores doc at a new resource version and tells every watch. The
// caller holds s.mu.
func (s *Server) commit(k *kind, doc map[string]any, typ watch.EventType) (runtime.Object, error) {
	s.rv++
	md := doc["metadata"].(map[string]any)
	md["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	obj, err := s.decode(k, doc)
	if err != nil {
		return nil, err
	}
	m, _ := meta.Accessor(obj)
	k.objects[k.key(m.GetNamespace(), m.GetName())] = obj
	s.notify(k, typ, obj, s.rv)
	return obj, nil
}

func (s *Server) decode(k *kind, doc map[string]any) (runtime.Object, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	gvk := k.gvr.GroupVersion().WithKind(k.kind)
	obj, err := s.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func str(v any) string { s, _ := v.(string); return s }
