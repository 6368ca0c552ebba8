package feed

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// request is a resource request's path, parsed.
type request struct {
	kind      *kind
	namespace string
	name      string
	sub       string
}

// ServeHTTP routes a request as the API server's paths do.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	switch path {
	case "version":
		s.writeJSON(w, &version.Info{Major: "1", Minor: "34", GitVersion: "v1.34.4-feed", Platform: "linux/amd64"})
		return
	case "healthz", "readyz", "livez":
		_, _ = w.Write([]byte("ok"))
		return
	case "api":
		s.writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case "apis":
		s.writeJSON(w, s.groups())
		return
	}
	gv, rest, ok := splitGroupVersion(path)
	if !ok {
		s.fail(w, r, apierrors.NewNotFound(schema.GroupResource{Resource: path}, ""))
		return
	}
	if rest == "" {
		list := s.resources(gv)
		if list == nil {
			s.fail(w, r, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version))
			return
		}
		s.writeJSON(w, list)
		return
	}
	req, err := s.parse(gv, rest)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.serveResource(w, r, req)
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, req request) {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && req.name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		s.count("watch", req.kind, "")
		s.watch(w, r, req)
	case r.Method == http.MethodGet && req.name == "":
		s.count("list", req.kind, "")
		s.list(w, r, req)
	case r.Method == http.MethodGet:
		s.count("get", req.kind, req.sub)
		s.get(w, r, req)
	case r.Method == http.MethodPost && req.sub != "":
		s.count("create", req.kind, req.sub)
		s.fail(w, r, apierrors.NewInternalError(errFeedRefuses(req.sub)))
	case r.Method == http.MethodPost:
		s.count("create", req.kind, "")
		s.create(w, r, req)
	case r.Method == http.MethodPut:
		s.count("update", req.kind, req.sub)
		s.update(w, r, req)
	case r.Method == http.MethodPatch:
		s.count("patch", req.kind, req.sub)
		s.patch(w, r, req)
	case r.Method == http.MethodDelete && req.name != "":
		s.count("delete", req.kind, "")
		s.remove(w, r, req)
	default:
		s.count(strings.ToLower(r.Method), req.kind, req.sub)
		s.fail(w, r, apierrors.NewMethodNotSupported(req.kind.gvr.GroupResource(), r.Method))
	}
}

// splitGroupVersion splits "api/v1/..." and "apis/group/version/...".
func splitGroupVersion(path string) (schema.GroupVersion, string, bool) {
	parts := strings.SplitN(path, "/", 4)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		return schema.GroupVersion{Version: parts[1]}, strings.Join(parts[2:], "/"), true
	case len(parts) >= 3 && parts[0] == "apis":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, strings.Join(parts[3:], "/"), true
	}
	return schema.GroupVersion{}, "", false
}

// parse reads [namespaces/NS/]RESOURCE[/NAME[/SUB]].
func (s *Server) parse(gv schema.GroupVersion, rest string) (request, error) {
	parts := strings.Split(rest, "/")
	var req request
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if _, ok := s.kinds[gv.WithResource(parts[2])]; ok {
			req.namespace, parts = parts[1], parts[2:]
		}
	}
	k, ok := s.kinds[gv.WithResource(parts[0])]
	if !ok {
		return req, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: parts[0]}, "")
	}
	req.kind = k
	if len(parts) > 1 {
		req.name = parts[1]
	}
	if len(parts) > 2 {
		req.sub = parts[2]
	}
	return req, nil
}

// groups is the legacy discovery document of every group served.
func (s *Server) groups() *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, k := range served {
		gv := k.gvr.GroupVersion()
		if gv.Group == "" || seen[gv.Group] {
			continue
		}
		seen[gv.Group] = true
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		out.Groups = append(out.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	return out
}

// resources is the discovery document of one group version, nil when it
// is not served.
func (s *Server) resources(gv schema.GroupVersion) *metav1.APIResourceList {
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, k := range served {
		if k.gvr.GroupVersion() != gv {
			continue
		}
		out.APIResources = append(out.APIResources, metav1.APIResource{Name: k.gvr.Resource, Namespaced: k.namespaced, Kind: k.kind,
			SingularName: strings.ToLower(k.kind), Verbs: verbs})
		if k.status {
			out.APIResources = append(out.APIResources, metav1.APIResource{Name: k.gvr.Resource + "/status", Namespaced: k.namespaced, Kind: k.kind,
				Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
	}
	if len(out.APIResources) == 0 {
		return nil
	}
	return out
}

func (s *Server) writeJSON(w http.ResponseWriter, obj any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// errFeedRefuses is the answer to what the feed does not decide: an
// eviction or a binding is the API server's judgement, and a benchmark
// must not take the feed's for it.
func errFeedRefuses(sub string) error {
	return fmt.Errorf("the feed does not decide %s: run this against a real API server", sub)
}
