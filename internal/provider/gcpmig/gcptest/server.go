package gcptest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/api/option"
	"k8s.io/utils/clock"
)

// New starts a project with no groups; it stops with the test. clk dates
// instances and operations.
func New(t testing.TB, clk clock.PassiveClock) *Server {
	s := &Server{clock: clk, groups: map[string]*group{}, templates: map[string]map[string]any{}, ops: map[string]map[string]any{},
		images: map[string]bool{ImageDebian: true, ImageUbuntu: true, ImageCOS: true}, exhausted: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// ClientOptions are what the provider's clients need to call the server:
// its address, no credentials, and a plain HTTP client.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.URL), option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{})}
}

// route is one REST method of the reference: its HTTP method, its path
// (after /compute/v1/projects/{project}/) and its handler, given the path's
// parts.
type route struct {
	method  string
	path    *regexp.Regexp
	handler func(s *Server, r *http.Request, m []string) (int, any)
}

const seg = `([a-z0-9-]+)`

var routes = []route{
	{"GET", regexp.MustCompile(`^(zones|regions)/` + seg + `/instanceGroupManagers/` + seg + `$`), (*Server).getGroup},
	{"POST", regexp.MustCompile(`^(zones|regions)/` + seg + `/instanceGroupManagers/` + seg + `/createInstances$`), (*Server).createInstances},
	{"POST", regexp.MustCompile(`^(zones|regions)/` + seg + `/instanceGroupManagers/` + seg + `/deleteInstances$`), (*Server).deleteInstances},
	{"POST", regexp.MustCompile(`^(zones|regions)/` + seg + `/instanceGroupManagers/` + seg + `/listManagedInstances$`), (*Server).listManagedInstances},
	{"POST", regexp.MustCompile(`^(zones|regions)/` + seg + `/instanceGroupManagers/` + seg + `/setInstanceTemplate$`), (*Server).setInstanceTemplate},
	{"GET", regexp.MustCompile(`^global/instanceTemplates/` + seg + `$`), (*Server).getTemplate},
	{"POST", regexp.MustCompile(`^global/instanceTemplates$`), (*Server).insertTemplate},
	{"GET", regexp.MustCompile(`^zones/` + seg + `/instances/` + seg + `$`), (*Server).getInstance},
	{"POST", regexp.MustCompile(`^zones/` + seg + `/instances/` + seg + `/reset$`), (*Server).resetInstance},
	{"GET", regexp.MustCompile(`^(?:zones/[a-z0-9-]+/|regions/[a-z0-9-]+/|global/)operations/([a-z0-9-]+)$`), (*Server).getOperation},
	{"POST", regexp.MustCompile(`^(?:zones/[a-z0-9-]+/|regions/[a-z0-9-]+/|global/)operations/([a-z0-9-]+)/wait$`), (*Server).getOperation},
}

var projectPath = regexp.MustCompile(`^/compute/v1/projects/([a-z0-9-]+)/(.*)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	status, body := s.answer(r)
	req := Request{Method: r.Method, Path: r.URL.Path, Status: status}
	s.mu.Lock()
	s.log = append(s.log, req)
	drop := s.DropAnswer
	s.mu.Unlock()
	if drop != nil && drop(req) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) answer(r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttled > 0 {
		s.throttled--
		return googleError(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "usageLimits", "rateLimitExceeded",
			"Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project_number:493817'.")
	}
	m := projectPath.FindStringSubmatch(r.URL.Path)
	if m == nil || m[1] != Project {
		return notFound(r.URL.Path)
	}
	for _, rt := range routes {
		if parts := rt.path.FindStringSubmatch(m[2]); parts != nil && rt.method == r.Method {
			return rt.handler(s, r, parts)
		}
	}
	return notFound(r.URL.Path)
}

// groupOf finds the group a path names: (zones|regions)/{location}/.../{name}.
func (s *Server) groupOf(m []string) (*group, bool) {
	g := s.groups[m[3]]
	if g == nil || (m[1] == "zones") != (g.zone != "") || (m[1] == "zones" && g.zone != m[2]) || (m[1] == "regions" && g.region != m[2]) {
		return nil, false
	}
	return g, true
}

func (s *Server) getGroup(_ *http.Request, m []string) (int, any) {
	g, ok := s.groupOf(m)
	if !ok {
		return notFound("projects/" + Project + "/" + m[1] + "/" + m[2] + "/instanceGroupManagers/" + m[3])
	}
	out := map[string]any{
		"kind": "compute#instanceGroupManager", "id": strconv.FormatInt(g.id, 10), "name": g.name, "selfLink": g.selfLink(),
		"baseInstanceName": g.name, "instanceTemplate": g.template, "targetSize": g.targetSize,
		"versions":     []any{map[string]any{"instanceTemplate": g.template}},
		"updatePolicy": map[string]any{"type": g.updatePolicy, "minimalAction": "REPLACE", "replacementMethod": "SUBSTITUTE"},
		"status":       map[string]any{"isStable": s.stable(g)},
	}
	if g.region != "" {
		out["region"] = api + "projects/" + Project + "/regions/" + g.region
		var zones []any
		for _, z := range g.zones {
			zones = append(zones, map[string]any{"zone": api + "projects/" + Project + "/zones/" + z})
		}
		out["distributionPolicy"] = map[string]any{"zones": zones, "targetShape": "EVEN"}
		out["updatePolicy"].(map[string]any)["instanceRedistributionType"] = "NONE"
	} else {
		out["zone"] = api + "projects/" + Project + "/zones/" + g.zone
	}
	return http.StatusOK, out
}

func (s *Server) stable(g *group) bool {
	for _, i := range g.instances {
		if i.action != "NONE" {
			return false
		}
	}
	return true
}

func (s *Server) createInstances(r *http.Request, m []string) (int, any) {
	g, ok := s.groupOf(m)
	if !ok {
		return notFound("projects/" + Project + "/" + m[1] + "/" + m[2] + "/instanceGroupManagers/" + m[3])
	}
	var body struct {
		Instances []struct {
			Name string `json:"name"`
		} `json:"instances"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Instances) == 0 {
		return badRequest("Invalid value for field 'resource.instances': ''. Must specify at least one instance.")
	}
	zone := s.zoneFor(g)
	for _, in := range body.Instances {
		// An instance's name is unique in its zone.
		if _, i := s.at(zone, in.Name); i != nil {
			return googleError(http.StatusConflict, "ALREADY_EXISTS", "global", "alreadyExists",
				fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", Project, i.zone, i.name))
		}
	}
	for _, in := range body.Instances {
		i := &instance{name: in.Name, zone: zone, template: g.template, id: s.id(), action: "CREATING"}
		g.instances = append(g.instances, i)
		g.targetSize++
		s.attempt(i)
	}
	return http.StatusOK, s.operation(g, "createInstances", nil)
}

func (s *Server) deleteInstances(r *http.Request, m []string) (int, any) {
	g, ok := s.groupOf(m)
	if !ok {
		return notFound("projects/" + Project + "/" + m[1] + "/" + m[2] + "/instanceGroupManagers/" + m[3])
	}
	var body struct {
		Instances []string `json:"instances"`
		Skip      bool     `json:"skipInstancesOnValidationError"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return badRequest("Invalid JSON payload received.")
	}
	var gone []*instance
	for _, url := range body.Instances {
		var found *instance
		for _, i := range g.instances {
			if url == i.url() || url == "zones/"+i.zone+"/instances/"+i.name || url == "projects/"+Project+"/zones/"+i.zone+"/instances/"+i.name {
				found = i
			}
		}
		if found == nil || found.action == "DELETING" {
			if body.Skip {
				continue
			}
			return http.StatusOK, s.operation(g, "deleteInstances", &attemptError{"CONDITION_NOT_MET",
				fmt.Sprintf("Instance '%s' is not a member of the instance group or is already being deleted.", url)})
		}
		gone = append(gone, found)
	}
	for _, i := range gone {
		i.action = "DELETING"
		g.targetSize--
	}
	return http.StatusOK, s.operation(g, "deleteInstances", nil)
}

func (s *Server) listManagedInstances(_ *http.Request, m []string) (int, any) {
	g, ok := s.groupOf(m)
	if !ok {
		return notFound("projects/" + Project + "/" + m[1] + "/" + m[2] + "/instanceGroupManagers/" + m[3])
	}
	var out []any
	for _, i := range g.instances {
		mi := map[string]any{"instance": i.url(), "name": i.name, "currentAction": i.action,
			"version": map[string]any{"instanceTemplate": i.template}}
		if i.status != "" {
			mi["id"] = strconv.FormatInt(i.id, 10)
			mi["instanceStatus"] = i.status
		}
		if len(i.errors) > 0 {
			var errs []any
			for _, e := range i.errors {
				errs = append(errs, map[string]any{"code": e.code, "message": e.message})
			}
			mi["lastAttempt"] = map[string]any{"errors": map[string]any{"errors": errs}}
		}
		out = append(out, mi)
	}
	return http.StatusOK, map[string]any{"managedInstances": out}
}

func (s *Server) setInstanceTemplate(r *http.Request, m []string) (int, any) {
	g, ok := s.groupOf(m)
	if !ok {
		return notFound("projects/" + Project + "/" + m[1] + "/" + m[2] + "/instanceGroupManagers/" + m[3])
	}
	var body struct {
		InstanceTemplate string `json:"instanceTemplate"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return badRequest("Invalid JSON payload received.")
	}
	if _, ok := s.templates[lastSegment(body.InstanceTemplate)]; !ok {
		return notFound("projects/" + Project + "/global/instanceTemplates/" + lastSegment(body.InstanceTemplate))
	}
	g.template = api + "projects/" + Project + "/global/instanceTemplates/" + lastSegment(body.InstanceTemplate)
	return http.StatusOK, s.operation(g, "setInstanceTemplate", nil)
}

func (s *Server) getTemplate(_ *http.Request, m []string) (int, any) {
	t, ok := s.templates[m[1]]
	if !ok {
		return notFound("projects/" + Project + "/global/instanceTemplates/" + m[1])
	}
	return http.StatusOK, t
}

func (s *Server) insertTemplate(r *http.Request, _ []string) (int, any) {
	var t map[string]any
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
		return badRequest("Invalid JSON payload received.")
	}
	n, _ := t["name"].(string)
	if n == "" || len(n) > 63 {
		return badRequest(fmt.Sprintf("Invalid value for field 'resource.name': '%s'. Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'", n))
	}
	if _, ok := s.templates[n]; ok {
		return googleError(http.StatusConflict, "ALREADY_EXISTS", "global", "alreadyExists",
			fmt.Sprintf("The resource 'projects/%s/global/instanceTemplates/%s' already exists", Project, n))
	}
	if image := bootImage(t); !s.images[image] {
		return notFound(image)
	}
	t["kind"], t["id"], t["selfLink"] = "compute#instanceTemplate", strconv.FormatInt(s.id(), 10), api+"projects/"+Project+"/global/instanceTemplates/"+n
	t["creationTimestamp"] = s.clock.Now().Format(time.RFC3339)
	s.templates[n] = t
	return http.StatusOK, s.operation(nil, "insert", nil)
}

// getInstance answers an instance as instances.get does: its metadata is
// its template's items and, for an instance a group made (by its own
// resize or by createInstances), the item created-by holding the group's
// partial URL with the project's number.
func (s *Server) getInstance(_ *http.Request, m []string) (int, any) {
	g, i := s.at(m[1], m[2])
	if i == nil || i.status == "" {
		return notFound("projects/" + Project + "/zones/" + m[1] + "/instances/" + m[2])
	}
	t := s.templates[lastSegment(i.template)]
	props, _ := t["properties"].(map[string]any)
	machineType := i.machineType
	if machineType == "" {
		machineType = fmt.Sprint(props["machineType"])
	}
	md, _ := props["metadata"].(map[string]any)
	items, _ := md["items"].([]any)
	items = slices.Clone(items)
	if g != nil {
		items = append(items, map[string]any{"key": "created-by", "value": "projects/" + ProjectNumber + "/" + g.location() + "/instanceGroupManagers/" + g.name})
	}
	out := map[string]any{
		"kind": "compute#instance", "id": strconv.FormatInt(i.id, 10), "name": i.name, "selfLink": i.url(),
		"zone": api + "projects/" + Project + "/zones/" + i.zone, "status": i.status,
		"machineType":       api + "projects/" + Project + "/zones/" + i.zone + "/machineTypes/" + machineType,
		"creationTimestamp": i.created.Format(time.RFC3339),
		"metadata":          map[string]any{"kind": "compute#metadata", "fingerprint": "fp-" + base36(i.id, 6), "items": items},
	}
	if labels := props["labels"]; labels != nil {
		out["labels"] = labels
	}
	return http.StatusOK, out
}

func (s *Server) getOperation(_ *http.Request, m []string) (int, any) {
	op, ok := s.ops[m[1]]
	if !ok {
		return notFound(m[1])
	}
	if op["status"] != "DONE" {
		op["status"], op["progress"], op["endTime"] = "DONE", 100, s.clock.Now().Format(time.RFC3339)
	}
	return http.StatusOK, maps.Clone(op)
}

// operation records an operation on the group (nil: a global one) and
// returns it as first answered: RUNNING. A failed one is DONE with its
// error, as Compute Engine reports an operation that failed.
func (s *Server) operation(g *group, kind string, fail *attemptError) map[string]any {
	n := fmt.Sprintf("operation-%d-%s", s.clock.Now().UnixMilli(), base36(s.id(), 12))
	now := s.clock.Now().Format(time.RFC3339)
	op := map[string]any{"kind": "compute#operation", "id": strconv.FormatInt(s.id(), 10), "name": n, "operationType": kind,
		"status": "RUNNING", "progress": 0, "insertTime": now, "startTime": now, "user": "sluice@" + Project + ".iam.gserviceaccount.com"}
	scope := api + "projects/" + Project + "/global"
	if g != nil {
		op["targetLink"], op["targetId"] = g.selfLink(), strconv.FormatInt(g.id, 10)
		scope = api + "projects/" + Project + "/" + g.location()
		if g.region != "" {
			op["region"] = api + "projects/" + Project + "/regions/" + g.region
		} else {
			op["zone"] = api + "projects/" + Project + "/zones/" + g.zone
		}
	}
	op["selfLink"] = scope + "/operations/" + n
	if fail != nil {
		op["status"], op["progress"], op["endTime"] = "DONE", 100, now
		op["error"] = map[string]any{"errors": []any{map[string]any{"code": fail.code, "message": fail.message}}}
		op["httpErrorStatusCode"], op["httpErrorMessage"] = http.StatusBadRequest, "BAD REQUEST"
	}
	s.ops[n] = op
	return maps.Clone(op)
}

// templateResource is an instance template as Compute Engine returns it.
func (s *Server) templateResource(t Template) map[string]any {
	image := t.Image
	if image == "" {
		image = ImageDebian
	}
	items := map[string]string{"startup-script": startupScript(t.NodeLabels, t.NodeTaints)}
	for k, v := range t.Metadata {
		items[k] = v
		if v == "" {
			delete(items, k)
		}
	}
	var md []any
	for _, k := range slices.Sorted(maps.Keys(items)) {
		md = append(md, map[string]any{"key": k, "value": items[k]})
	}
	props := map[string]any{
		"machineType": t.MachineType,
		"disks": []any{map[string]any{"boot": true, "autoDelete": true, "type": "PERSISTENT", "mode": "READ_WRITE",
			"initializeParams": map[string]any{"sourceImage": image, "diskSizeGb": "50", "diskType": "pd-balanced"}}},
		"metadata":          map[string]any{"kind": "compute#metadata", "fingerprint": "fp-" + base36(s.id(), 6), "items": md},
		"networkInterfaces": []any{map[string]any{"network": api + "projects/" + Project + "/global/networks/default"}},
	}
	if len(t.Labels) > 0 {
		props["labels"] = t.Labels
	}
	return map[string]any{"kind": "compute#instanceTemplate", "id": strconv.FormatInt(s.id(), 10), "name": t.Name,
		"selfLink":          api + "projects/" + Project + "/global/instanceTemplates/" + t.Name,
		"creationTimestamp": s.clock.Now().Format(time.RFC3339), "properties": props}
}

func bootImage(t map[string]any) string {
	props, _ := t["properties"].(map[string]any)
	disks, _ := props["disks"].([]any)
	for _, d := range disks {
		disk, _ := d.(map[string]any)
		if boot, _ := disk["boot"].(bool); boot {
			params, _ := disk["initializeParams"].(map[string]any)
			image, _ := params["sourceImage"].(string)
			return image
		}
	}
	return ""
}

func metadataItems(t map[string]any) map[string]string {
	out := map[string]string{}
	props, _ := t["properties"].(map[string]any)
	md, _ := props["metadata"].(map[string]any)
	items, _ := md["items"].([]any)
	for _, it := range items {
		kv, _ := it.(map[string]any)
		k, _ := kv["key"].(string)
		v, _ := kv["value"].(string)
		out[k] = v
	}
	return out
}

// googleError is Google's JSON error body.
func googleError(code int, status, domain, reason, message string) (int, any) {
	return code, map[string]any{"error": map[string]any{"code": code, "message": message, "status": status,
		"errors": []any{map[string]any{"message": message, "domain": domain, "reason": reason}}}}
}

func notFound(resource string) (int, any) {
	return googleError(http.StatusNotFound, "NOT_FOUND", "global", "notFound", fmt.Sprintf("The resource '%s' was not found", resource))
}

func badRequest(message string) (int, any) {
	return googleError(http.StatusBadRequest, "INVALID_ARGUMENT", "global", "invalid", message)
}

// resetInstance answers instances.reset
// (https://cloud.google.com/compute/docs/reference/rest/v1/instances/reset):
// "a hard reset", answered with a zonal Operation on the instance. An
// instance that does not exist (or is only a managed instance being
// created) is 404 notFound, as instances.get answers it.
func (s *Server) resetInstance(_ *http.Request, m []string) (int, any) {
	_, i := s.at(m[1], m[2])
	if i == nil || i.status == "" {
		return notFound("projects/" + Project + "/zones/" + m[1] + "/instances/" + m[2])
	}
	i.resets++
	op := s.operation(nil, "reset", nil)
	n := op["name"].(string)
	zone := api + "projects/" + Project + "/zones/" + i.zone
	for _, o := range []map[string]any{op, s.ops[n]} {
		o["zone"], o["targetLink"], o["targetId"], o["selfLink"] = zone, i.url(), strconv.FormatInt(i.id, 10), zone+"/operations/"+n
	}
	return http.StatusOK, op
}
