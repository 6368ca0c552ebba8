// Package walk follows the README's path of a platform engineer once, end to
// end, with the real tools at every step: the sandbox `make demo` starts, the
// README's own `helm upgrade --install` with monitoring on, the Prometheus
// Operator's objects read back from the cluster, a real Prometheus server
// scraping sluice and evaluating the chart's rules, the dashboard's queries
// answered by it, and the alerts firing and clearing on a real blocked drain.
package walk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// The tools make test builds and names (see the Makefile's test target).
const (
	promtoolEnv = "SLUICE_PROMTOOL" // the Prometheus server is built beside it, from the same release
	helmEnv     = "SLUICE_HELM4"
	crdsEnv     = "SLUICE_MONITORING_CRDS"
)

func TestFromTheReadmeToAFiringAlert(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and Prometheus")
	}
	prometheus, helm, crds := tool(t, promtoolEnv), tool(t, helmEnv), tool(t, crdsEnv)
	prometheus = filepath.Join(filepath.Dir(prometheus), "prometheus")
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sluice := sandboxtest.Sluice(t)

	// The sandbox make demo starts: the sample cluster, its simulated cloud
	// and agents, and the controller with its /metrics.
	common := []string{"--name", "walk", "--dir", filepath.Join(t.TempDir(), "sb")}
	t.Cleanup(func() { _, _ = run("", sluice, append([]string{"sandbox", "down"}, common...)...) })
	must(t, "", sluice, append([]string{"sandbox", "up", "--tools-bin", tools}, common...)...)
	var st struct {
		Kubeconfig string `json:"kubeconfig"`
		Metrics    string `json:"metricsAddress"`
	}
	decode(t, must(t, "", sluice, append([]string{"sandbox", "status", "-o", "json"}, common...)...), &st)
	kubectl := func(args ...string) string {
		t.Helper()
		return must(t, "", filepath.Join(tools, "kubectl"), append([]string{"--kubeconfig", st.Kubeconfig}, args...)...)
	}

	// A cluster with kube-prometheus-stack has the operator's CRDs; then
	// the README's command, word for word.
	kubectl("apply", "--server-side", "-f", crds)
	install := readmeCommand(t, filepath.Join(root, "README.md"), "## Watching it")
	if install[0] != "helm" {
		t.Fatalf("the README's monitoring command does not start with helm: %q", install)
	}
	must(t, root, helm, append(install[1:], "--kubeconfig", st.Kubeconfig)...)
	// The release installs beside the sandbox's own agents (named
	// sluice-sandbox-agent); kwok runs its pods, which do nothing.
	kubectl("rollout", "status", "daemonset/sluice-agent", "-n", "sluice-system", "--timeout=3m")
	kubectl("rollout", "status", "deployment/sluice-controller", "-n", "sluice-system", "--timeout=3m")

	// What the operator and Grafana's sidecar would pick up, read back from
	// the cluster: the rules, the scrape endpoint, the dashboard.
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	decode(t, kubectl("get", "prometheusrule", "sluice", "-n", "sluice-system", "-o", "json"), &rule)
	rules, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	monitor := kubectl("get", "servicemonitor", "sluice-controller", "-n", "sluice-system", "-o", "jsonpath={.spec.endpoints[0].port} {.spec.selector.matchLabels}")
	service := kubectl("get", "service", "-n", "sluice-system", "-l", "app.kubernetes.io/component=controller-metrics", "-o", "jsonpath={.items[*].spec.ports[*].name}")
	if !strings.HasPrefix(monitor, "metrics ") || !slices.Contains(strings.Fields(service), "metrics") {
		t.Errorf("the ServiceMonitor (%q) does not select a Service port named metrics (Service ports: %q)", monitor, service)
	}
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	decode(t, kubectl("get", "configmap", "sluice-grafana-dashboard", "-n", "sluice-system", "-o", "json"), &cm)
	if cm.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap lacks the sidecar's label grafana_dashboard=1: %v", cm.Metadata.Labels)
	}
	panels := dashboardPanels(t, cm.Data["sluice.json"])

	// Prometheus, as the ServiceMonitor would configure it (every second
	// instead of every 30 s, so the test is short), with the rules as the
	// operator writes them.
	prom := startPrometheus(t, prometheus, st.Metrics, rules)
	prom.waitFor(t, time.Minute, "the controller's target up", func() (bool, error) {
		res, err := prom.query(`up{job="sluice-controller"} == 1`)
		return len(res) == 1, err
	})

	// The reference story, on a node the cloud redeploys in 40 s:
	// checkout's one replica under minAvailable 1, which no eviction can
	// move, and a pod whose finalizer's owner is down, which leaves no
	// faster than that owner comes back.
	node := kubectl("get", "pods", "-n", "shop", "-l", "app=checkout", "-o", "jsonpath={.items[0].spec.nodeName}")
	apply(t, kubectl, fmt.Sprintf(heldDeployment, node))
	kubectl("rollout", "status", "deployment/held", "-n", "shop", "--timeout=2m")
	must(t, "", sluice, append([]string{"sandbox", "event", "--node", node, "--type", "Redeploy", "--in", "40s", "--duration", "10m"}, common...)...)

	// While the budget holds checkout: the deadlock alert is pending (it
	// fires after 5 minutes of it; promtool's unit tests time that), and
	// Grafana's panels show the drain. Near the deadline the controller
	// deletes checkout anyway, as the pool's onDeadline says.
	var alerts []alert
	prom.waitFor(t, 2*time.Minute, "SluicePDBDeadlock pending", func() (bool, error) {
		var err error
		alerts, err = prom.alerts()
		return find(alerts, "SluicePDBDeadlock", "pending") != nil, err
	})
	if a := find(alerts, "SluicePDBDeadlock", "pending"); a.Labels["blocker"] != "PDBDeadlock" || a.Labels["severity"] != "warning" {
		t.Errorf("SluicePDBDeadlock labels %v; want blocker PDBDeadlock, severity warning", a.Labels)
	}
	for title, exprs := range panels {
		for _, expr := range exprs {
			// A panel is a graph over the dashboard's range, not the value
			// at this instant: what it showed at any point since the event
			// (a burst of evictions at the drain's start falls out of a 1m
			// rate before the deadlock alert is pending on a slow machine).
			res, err := prom.query(fmt.Sprintf("max_over_time((%s)[5m:1s])", expr))
			if err != nil {
				t.Errorf("panel %q: %s: %v", title, expr, err)
			}
			if positive(res) {
				panels[title] = nil // shows something
			}
		}
	}
	for _, title := range []string{"Drains in flight", "Blocked pods by blocker", "Maintenance events by type and cloud", "Evictions per second"} {
		if panels[title] != nil {
			t.Errorf("dashboard panel %q shows nothing above zero during a blocked maintenance drain", title)
		}
	}
	for _, expr := range []string{
		`max by (blocker) (sluice_drain_blocked_pods{blocker="PDBDeadlock"}) == 1`,
		`max(sluice_termination_disrupting_nodes) == 1`,
		`sum by (source, type) (increase(sluice_maintenance_events_seen_total[1h])) > 0`,
	} {
		if res, err := prom.query(expr); err != nil || len(res) != 1 || !positive(res) {
			t.Errorf("%s: %s, %v; want one series above zero", expr, res, err)
		}
	}

	// The drain ends by its deadline, Blocked, with the held pod still
	// terminating on the node: a minute past the deadline the critical
	// alert fires.
	prom.waitFor(t, 3*time.Minute, "SluiceDrainPastDeadline firing", func() (bool, error) {
		var err error
		alerts, err = prom.alerts()
		return find(alerts, "SluiceDrainPastDeadline", "firing") != nil, err
	})
	if a := find(alerts, "SluiceDrainPastDeadline", "firing"); a.Labels["severity"] != "critical" || !strings.HasPrefix(a.Annotations["description"], "1 node(s) have passed the deadline") {
		t.Errorf("SluiceDrainPastDeadline: labels %v, description %q", a.Labels, a.Annotations["description"])
	}

	// The finalizer's owner comes back: the pod goes, the drain ends, and
	// the alerts clear long before the 10-minute event would end on its own.
	for _, pod := range strings.Fields(kubectl("get", "pods", "-n", "shop", "-l", "app=held", "-o", "jsonpath={.items[*].metadata.name}")) {
		kubectl("patch", "pod", pod, "-n", "shop", "--type=json", `-p=[{"op":"remove","path":"/metadata/finalizers"}]`)
	}
	prom.waitFor(t, 2*time.Minute, "the alerts to clear", func() (bool, error) {
		alerts, err := prom.alerts()
		return len(alerts) == 0, err
	})
}

// heldDeployment has one pod on node %s that a finalizer holds once deleted.
const heldDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: held, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: held}}
  template:
    metadata:
      labels: {app: held}
      finalizers: [walk.sluice.dev/owner-is-down]
    spec:
      nodeSelector: {kubernetes.io/hostname: %s}
      containers: [{name: held, image: registry.k8s.io/pause:3.10}]
`

func apply(t *testing.T, kubectl func(...string) string, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", file)
}

// tool is the path make test puts in the environment variable, or a skip.
func tool(t *testing.T, env string) string {
	t.Helper()
	return testenv.Tool(t, env, "run `make test`, which sets it")
}

// readmeCommand is the first shell command in the first ```sh block after
// the heading, its continuation lines joined.
func readmeCommand(t *testing.T, path, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", path, heading)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s's %q section has no sh block", path, heading)
	}
	block, _, _ = strings.Cut(block, "```")
	cmd, _, _ := strings.Cut(strings.ReplaceAll(block, "\\\n", " "), "\n")
	return strings.Fields(cmd)
}

// dashboardPanels maps each panel's title to its queries, as Grafana sends
// them: the $datasource every panel uses, $__rate_interval filled in.
func dashboardPanels(t *testing.T, raw string) map[string][]string {
	t.Helper()
	var d struct {
		Templating struct {
			List []struct{ Name, Type, Query string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title      string `json:"title"`
			Datasource struct{ Type, UID string }
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Errorf("the dashboard's variables %+v; want one Prometheus data source", d.Templating.List)
	}
	variable := regexp.MustCompile(`\$\{?\w+`)
	panels := map[string][]string{}
	for _, p := range d.Panels {
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${"+d.Templating.List[0].Name+"}" {
			t.Errorf("panel %q queries data source %+v, not the dashboard's variable", p.Title, p.Datasource)
		}
		for _, target := range p.Targets {
			// Grafana's floor for $__rate_interval is four scrape intervals;
			// a minute is more than that here, and what a person sees.
			expr := strings.ReplaceAll(target.Expr, "$__rate_interval", "1m")
			if v := variable.FindString(expr); v != "" {
				t.Errorf("panel %q uses %s, which this test does not fill in: %s", p.Title, v, target.Expr)
			}
			panels[p.Title] = append(panels[p.Title], expr)
		}
	}
	if len(panels) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return panels
}

// httpClient asks Prometheus on loopback; a hung answer fails the poll, not the test run.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// positive says whether any series of an instant query's answer is above
// zero: a panel whose counters start at zero shows a line at zero before
// anything happened.
func positive(res []json.RawMessage) bool {
	for _, raw := range res {
		var sample struct {
			Value [2]any `json:"value"`
		}
		if json.Unmarshal(raw, &sample) != nil {
			continue
		}
		if v, ok := sample.Value[1].(string); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
				return true
			}
		}
	}
	return false
}

// prometheusServer is a Prometheus process on loopback.
type prometheusServer struct{ base string }

func startPrometheus(t *testing.T, bin, target string, rules []byte) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	config, err := yaml.Marshal(map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{"rules.yaml"},
		"scrape_configs": []any{map[string]any{
			"job_name":       "sluice-controller",
			"metrics_path":   "/metrics",
			"static_configs": []any{map[string]any{"targets": []string{target}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"prometheus.yaml": config, "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yaml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr) //nolint:gosec // the pinned Prometheus make test builds
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logs.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("prometheus's log:\n%s", out)
		}
	})
	p := &prometheusServer{base: "http://" + addr}
	p.waitFor(t, time.Minute, "Prometheus ready", func() (bool, error) {
		resp, err := httpClient.Get(p.base + "/-/ready")
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

func find(alerts []alert, name, state string) *alert {
	for i, a := range alerts {
		if a.Labels["alertname"] == name && a.State == state {
			return &alerts[i]
		}
	}
	return nil
}

// alerts are the pending and firing alerts.
func (p *prometheusServer) alerts() ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	return data.Alerts, p.get("/api/v1/alerts", &data)
}

// query answers an instant query: the series, or the API's error.
func (p *prometheusServer) query(expr string) ([]json.RawMessage, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	return data.Result, p.get("/api/v1/query?query="+url.QueryEscape(expr), &data)
}

func (p *prometheusServer) get(path string, data any) error {
	resp, err := httpClient.Get(p.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// waitFor polls cond every half second; an error is kept and reported if
// the condition never holds.
func (p *prometheusServer) waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		time.Sleep(500 * time.Millisecond)
	}
	alerts, _ := p.alerts()
	series, _ := p.query(`{__name__=~"sluice_(termination|drain|maintenance)_.+", __name__!~".+_bucket"}`)
	var seen strings.Builder
	for _, s := range series {
		seen.Write(s)
		seen.WriteByte('\n')
	}
	t.Fatalf("waited %s for %s; last error %v; alerts now %+v\nsluice's series now:\n%s", timeout, what, last, alerts, seen.String())
}

func run(dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // the binaries under test
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w\n%s", err, stderr.String())
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}

func must(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := run(dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func decode(t *testing.T, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("decoding %q: %v", raw, err)
	}
}

// TestMain removes the sluice binary the walk built; the walk starts its
// own sandbox, as a user would, so it needs no shared one.
func TestMain(m *testing.M) {
	code := m.Run()
	sandboxtest.RemoveBinary()
	os.Exit(code)
}
