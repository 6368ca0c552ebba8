package chart_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/agent"
	"github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// PromtoolEnv names the promtool binary the rules' tests run (make test sets
// it from hack/tools/gotool.sh promtool, which builds the pinned one).
const PromtoolEnv = "SLUICE_PROMTOOL"

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Tool(t, PromtoolEnv, "run `make test`, or `"+PromtoolEnv+"=$(hack/tools/gotool.sh promtool) go test ./charts/...`")
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The alerts are valid rules, pass their unit tests, and are what the
// PrometheusRule carries.
func TestAlertsPassPromtool(t *testing.T) {
	promtool(t, "check", "rules", "files/alerts.yaml")
	out := promtool(t, "test", "rules", "files/alerts_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not report SUCCESS:\n%s", out)
	}

	objs := chart.Objects(t, chart.Helm(t, "template", "sluice", ".", "-n", "sluice-system", "--set", "monitoring.prometheusRule.enabled=true"))
	spec, ok := objs["PrometheusRule/sluice"]["spec"]
	if !ok {
		t.Fatal("no PrometheusRule rendered with monitoring.prometheusRule.enabled")
	}
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	rendered := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(rendered, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", rendered)
	var file map[string]any
	src, err := os.ReadFile("files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(t, file), normalize(t, spec)) {
		t.Error("the PrometheusRule's spec is not files/alerts.yaml")
	}
}

// dashboardQueries are the dashboard's queries, by panel title.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	src, err := os.ReadFile("files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(src, &dash); err != nil {
		t.Fatalf("files/dashboard.json: %v", err)
	}
	out := map[string][]string{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			// $__rate_interval is Grafana's own variable, which Prometheus does not know.
			out[p.Title] = append(out[p.Title], strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
		}
	}
	return out
}

// Every dashboard query is valid PromQL: promtool checks each, as a
// recording rule.
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	var rules []map[string]string
	for _, title := range slices.Sorted(maps.Keys(dashboardQueries(t))) {
		for i, expr := range dashboardQueries(t)[title] {
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:%s:%d", recordName.ReplaceAllString(strings.ToLower(title), "_"), i), "expr": expr})
		}
	}
	raw, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", file)
}

var recordName = regexp.MustCompile(`[^a-z0-9]+`)

// Every sluice metric the dashboard and the alerts name is one the code
// registers.
func TestDashboardAndAlertsNameRealMetrics(t *testing.T) {
	var text []string
	for _, exprs := range dashboardQueries(t) {
		text = append(text, exprs...)
	}
	alerts, err := os.ReadFile("files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, string(alerts))
	known := registeredNames(t)
	refs := metricRef.FindAllString(strings.Join(text, "\n"), -1)
	if len(refs) < 10 {
		t.Fatalf("only %d metric references found: %v", len(refs), refs)
	}
	for _, name := range refs {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !known[name] && !known[base] {
			t.Errorf("%s is named by the dashboard or the alerts, but no sluice code registers it", name)
		}
	}
}

var metricRef = regexp.MustCompile(`\bsluice_[a-z_]+\b`)

// registeredNames are the metric names sluice's controller and agent
// register.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	termination.NewMetrics(reg)
	agent.NewMetrics(reg)
	maintenance.NewMetrics(reg)
	nodepool.NewMetrics(reg)
	if err := provider.Register(reg); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range []prometheus.Collector{reg} {
			c.Describe(ch)
		}
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metric names registered: %v", len(names), names)
	}
	return names
}

// The monitoring objects come with their values, and only then: the
// ServiceMonitor selects the metrics Service, the PodMonitor the agents'
// port, the dashboard ConfigMap carries the sidecar's label and the JSON.
func TestMonitoringValues(t *testing.T) {
	off := chart.Objects(t, chart.Helm(t, "template", "sluice", ".", "-n", "sluice-system"))
	for _, k := range []string{"ServiceMonitor/sluice-controller", "PodMonitor/sluice-agent", "PrometheusRule/sluice", "ConfigMap/sluice-grafana-dashboard"} {
		if _, ok := off[k]; ok {
			t.Errorf("%s rendered by default; the Prometheus Operator's CRDs may not exist", k)
		}
	}
	on := chart.Objects(t, chart.Helm(t, "template", "sluice", ".", "-n", "sluice-system",
		"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.podMonitor.enabled=true",
		"--set", "monitoring.grafanaDashboard.enabled=true", "--set", "monitoring.grafanaDashboard.namespace=grafana",
		"--set", "monitoring.labels.release=kube-prometheus-stack"))
	svc := on["Service/sluice-controller-metrics"]
	sel, _ := chart.At(on["ServiceMonitor/sluice-controller"], "spec", "selector", "matchLabels").(map[string]any)
	if len(sel) == 0 {
		t.Fatal("no ServiceMonitor selector")
	}
	for k, v := range sel {
		if chart.At(svc, "metadata", "labels", k) != v {
			t.Errorf("the ServiceMonitor selects %s=%v; the metrics Service has %v", k, v, chart.At(svc, "metadata", "labels", k))
		}
	}
	if chart.At(on["ServiceMonitor/sluice-controller"], "metadata", "labels", "release") != "kube-prometheus-stack" {
		t.Error("monitoring.labels did not reach the ServiceMonitor")
	}
	containers, _ := chart.At(on["DaemonSet/sluice-agent"], "spec", "template", "spec", "containers").([]any)
	if len(containers) == 0 {
		t.Fatal("no agent DaemonSet")
	}
	ports, _ := chart.At(containers[0], "ports").([]any)
	if len(ports) != 1 || chart.At(ports[0], "name") != "metrics" || chart.At(ports[0], "containerPort") != float64(9730) {
		t.Errorf("agent ports %v; want metrics on 9730", ports)
	}
	args := chart.At(containers[0], "args").([]any)
	if !slices.Contains(args, any("--metrics-bind-address=:9730")) {
		t.Errorf("agent args %v lack --metrics-bind-address=:9730", args)
	}
	if chart.At(on["PodMonitor/sluice-agent"], "spec", "podMetricsEndpoints") == nil {
		t.Error("no PodMonitor endpoints")
	}
	cm := on["ConfigMap/sluice-grafana-dashboard"]
	if chart.At(cm, "metadata", "namespace") != "grafana" || chart.At(cm, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Errorf("dashboard ConfigMap metadata %v", chart.At(cm, "metadata"))
	}
	src, err := os.ReadFile("files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := chart.At(cm, "data", "sluice.json").(string); strings.TrimSpace(got) != strings.TrimSpace(string(src)) {
		t.Error("the dashboard ConfigMap does not carry files/dashboard.json")
	}

	// With the agent's port off there is nothing for a PodMonitor to scrape.
	noPort := chart.Objects(t, chart.Helm(t, "template", "sluice", ".", "-n", "sluice-system", "--set", "monitoring.podMonitor.enabled=true", "--set", "agent.metricsPort=0"))
	if _, ok := noPort["PodMonitor/sluice-agent"]; ok {
		t.Error("a PodMonitor rendered with agent.metricsPort=0")
	}
}

// normalize round-trips v through JSON, so YAML's and the decoder's number
// and map types compare equal.
func normalize(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
