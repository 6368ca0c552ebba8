package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var kwok = v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok}

func newPoolOpts() KuredOptions {
	return KuredOptions{Name: "batch", Selector: map[string]string{"agentpool": "batch"}, Provider: kwok}
}

func kuredFile(t *testing.T, name string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "kured", name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".yaml") {
		var v struct {
			Configuration map[string]any `json:"configuration"`
		}
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return KuredChartValues(v.Configuration)
	}
	flags, err := ParseKuredArgs(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return flags
}

// TestKuredWindows: kured's days and times become a cron schedule and a
// duration that open the same window.
func TestKuredWindows(t *testing.T) {
	cases := []struct {
		name     string
		flags    map[string][]string
		schedule string // "" for no window
		duration time.Duration
		zone     string
		differs  string
	}{
		{"defaults: any time", nil, "", 0, "", ""},
		{"every day all day, said", map[string][]string{"reboot-days": {"su,mo,tu,we,th,fr,sa"}, "start-time": {"0:00"}, "end-time": {"23:59:59"}}, "", 0, "", ""},
		{"weekday nights", map[string][]string{"reboot-days": {"mon,tue,wed,thu,fri"}, "start-time": {"22:00"}, "end-time": {"4:30"}}, "0 22 * * 1,2,3,4,5", 6*time.Hour + 30*time.Minute, "", "past midnight"},
		{"weekends in Berlin", map[string][]string{"reboot-days": {"sa,su"}, "start-time": {"2am"}, "end-time": {"6am"}, "time-zone": {"Europe/Berlin"}}, "0 2 * * 0,6", 4 * time.Hour, "Europe/Berlin", ""},
		{"numbers and a 12-hour clock", map[string][]string{"reboot-days": {"1", "3"}, "start-time": {"03:15pm"}, "end-time": {"17:15"}}, "15 15 * * 3", 2 * time.Hour, "", ""},
		{"until the end of the day", map[string][]string{"start-time": {"20:00"}}, "0 20 * * *", 4 * time.Hour, "", ""},
		{"seconds", map[string][]string{"start-time": {"1:00:30"}, "end-time": {"2:00"}}, "0 1 * * *", 59 * time.Minute, "", "on the minute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Kured(c.flags, newPoolOpts())
			if err != nil {
				t.Fatal(err)
			}
			rb := res.NodePools[0].Spec.Reboot
			if c.schedule == "" {
				if len(rb.Windows) != 0 {
					t.Errorf("windows %+v, want none (any time)", rb.Windows)
				}
				return
			}
			if len(rb.Windows) != 1 {
				t.Fatalf("windows %+v", rb.Windows)
			}
			w := rb.Windows[0]
			if w.Schedule != c.schedule || w.Duration.Duration != c.duration {
				t.Errorf("window %q for %s, want %q for %s", w.Schedule, w.Duration.Duration, c.schedule, c.duration)
			}
			if got := ptrString(w.TimeZone); got != c.zone {
				t.Errorf("time zone %q, want %q", got, c.zone)
			}
			if c.differs != "" {
				found := false
				for _, e := range res.Report {
					found = found || e.Status == Differs && strings.Contains(e.Reason, c.differs)
				}
				if !found {
					t.Errorf("no Differs entry saying %q:\n%s", c.differs, reportText(res))
				}
			}
			checkPools(t, c.name, res.NodePools)
		})
	}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestKured(t *testing.T) {
	t.Run("args", func(t *testing.T) {
		res, err := Kured(kuredFile(t, "args.txt"), newPoolOpts())
		if err != nil {
			t.Fatal(err)
		}
		p := res.NodePools[0]
		rb := p.Spec.Reboot
		if len(rb.BlockingPodSelectors) != 2 || rb.BlockingPodSelectors[1].MatchLabels["runtime"] != "long" || len(rb.BlockingPodSelectors[1].MatchExpressions) != 1 {
			t.Errorf("blocking pod selectors %+v", rb.BlockingPodSelectors)
		}
		if rb.Prometheus == nil || rb.Prometheus.URL != "http://prometheus.monitoring:9090" || rb.Prometheus.AlertFilterRegexp != "^(Watchdog|RebootRequired)$" || !rb.Prometheus.FiringOnly || rb.Prometheus.AlertFilterMatchOnly {
			t.Errorf("prometheus %+v", rb.Prometheus)
		}
		b := p.Spec.Disruption.Budgets
		if len(b) != 2 || b[0].Nodes != "10%" || b[1].Nodes != "2" || len(b[1].Reasons) != 1 || b[1].Reasons[0] != v1alpha1.ReasonRebootRequired {
			t.Errorf("budgets %v: want sluice's default kept and 2 for RebootRequired", b)
		}
		if tgp := p.Spec.Disruption.TerminationGracePeriod; tgp == nil || tgp.Duration != 30*time.Minute {
			t.Errorf("terminationGracePeriod %v: --drain-timeout with --force-reboot", tgp)
		}
		for path, want := range map[string]any{"agent.reboot.sentinel": "/var/run/reboot-required", "agent.reboot.checkPeriod": "10m0s", "controller.webhook.url": "https://hooks.slack.com/services/T000/B000/XXXX"} {
			if got := get(res.Values, path); got != want {
				t.Errorf("values %s = %v, want %v", path, got, want)
			}
		}
		checkValues(t, "args.txt", res.Values)
		wantStatus(t, res, "--lock-ttl", NotMapped, "no lock")
		wantStatus(t, res, "--reboot-command", NotMapped, "provider")
		wantStatus(t, res, "--concurrency", Differs, "any reason")
		wantStatus(t, res, "--prometheus-url", Differs, "does not answer")
		checkPools(t, "args.txt", res.NodePools)
		kuredEveryFlagReported(t, "args.txt", res)
	})
	t.Run("env", func(t *testing.T) {
		res, err := Kured(kuredFile(t, "env.txt"), newPoolOpts())
		if err != nil {
			t.Fatal(err)
		}
		if got := get(res.Values, "agent.reboot.sentinelCommand"); got != "sh -c 'test -f /var/run/reboot-required'" {
			t.Errorf("sentinelCommand %q", got)
		}
		wantStatus(t, res, "--reboot-sentinel-command", Differs, "container")
		wantStatus(t, res, "--lock-release-delay", NotMapped)
		checkPools(t, "env.txt", res.NodePools)
		kuredEveryFlagReported(t, "env.txt", res)
	})
	t.Run("chart values", func(t *testing.T) {
		res, err := Kured(kuredFile(t, "chart-values.yaml"), newPoolOpts())
		if err != nil {
			t.Fatal(err)
		}
		p := res.NodePools[0]
		if w := p.Spec.Reboot.Windows; len(w) != 1 || w[0].Schedule != "0 1 * * 6" || w[0].Duration.Duration != 4*time.Hour {
			t.Errorf("windows %+v", w)
		}
		if b := p.Spec.Disruption.Budgets; b[len(b)-1].Nodes != "3" {
			t.Errorf("budgets %v", b)
		}
		checkPools(t, "chart-values.yaml", res.NodePools)
		kuredEveryFlagReported(t, "chart-values.yaml", res)
	})
}

func kuredEveryFlagReported(t *testing.T, file string, res *Result) {
	t.Helper()
	for name := range kuredFile(t, file) {
		found := false
		for _, e := range res.Report {
			found = found || strings.Contains(e.Field, "--"+name)
		}
		if !found {
			t.Errorf("%s: --%s is not in the report", file, name)
		}
	}
}

// TestKuredIntoExistingPool: the settings go into the pool the cluster
// has, keeping the rest of it, and replacing its RebootRequired budget.
func TestKuredIntoExistingPool(t *testing.T) {
	base := newNodePool("batch")
	base.UID, base.ResourceVersion = "u-1", "42"
	base.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "batch"}}
	base.Spec.Provider = kwok
	base.Spec.Disruption = &v1alpha1.DisruptionSpec{ExpireAfter: "720h", Budgets: []v1alpha1.Budget{
		{Nodes: "20%"}, {Nodes: "5", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonRebootRequired}},
	}}
	res, err := Kured(map[string][]string{"concurrency": {"3"}}, KuredOptions{Base: base, Name: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	p := res.NodePools[0]
	if p.UID != "" || p.ResourceVersion != "" {
		t.Errorf("server fields kept: uid %q resourceVersion %q", p.UID, p.ResourceVersion)
	}
	if p.Spec.Disruption.ExpireAfter != "720h" || p.Spec.NodeSelector.MatchLabels["pool"] != "batch" {
		t.Errorf("the pool's own settings were lost: %+v", p.Spec)
	}
	b := p.Spec.Disruption.Budgets
	if len(b) != 2 || b[0].Nodes != "20%" || b[1].Nodes != "3" {
		t.Errorf("budgets %v, want [20%% 3 for RebootRequired]", b)
	}
	if base.Spec.Disruption.Budgets[1].Nodes != "5" {
		t.Error("the import changed the pool it was given")
	}
	checkPools(t, "existing", res.NodePools)
}

func TestKuredBadInput(t *testing.T) {
	noneBase := newNodePool("x")
	cases := []struct {
		name  string
		flags map[string][]string
		opts  KuredOptions
		want  string
	}{
		{"no name", nil, KuredOptions{}, "--name"},
		{"no selector", nil, KuredOptions{Name: "x", Provider: kwok}, "--selector"},
		{"provider none", nil, KuredOptions{Name: "x", Selector: map[string]string{"a": "b"}}, "cannot reboot"},
		{"existing pool without provider", nil, KuredOptions{Base: noneBase}, "cannot reboot"},
		{"bad day", map[string][]string{"reboot-days": {"mon,funday"}}, newPoolOpts(), `"funday" is not a day`},
		{"bad time", map[string][]string{"start-time": {"noon"}}, newPoolOpts(), `--start-time "noon"`},
		{"bad zone", map[string][]string{"time-zone": {"Mars/Olympus"}}, newPoolOpts(), `--time-zone "Mars/Olympus"`},
		{"bad selector", map[string][]string{"blocking-pod-selector": {"app in (x"}}, newPoolOpts(), "--blocking-pod-selector"},
		{"bad regexp", map[string][]string{"prometheus-url": {"http://p:9090"}, "alert-filter-regexp": {"(("}}, newPoolOpts(), "--alert-filter-regexp"},
		{"bad concurrency", map[string][]string{"concurrency": {"0"}}, newPoolOpts(), "--concurrency"},
		{"bad period", map[string][]string{"period": {"1s"}}, newPoolOpts(), "--period 1s"},
		{"bad bool", map[string][]string{"force-reboot": {"perhaps"}}, newPoolOpts(), "--force-reboot"},
		{"empty window", map[string][]string{"start-time": {"2:00"}, "end-time": {"2:00"}}, newPoolOpts(), "shorter than a minute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Kured(c.flags, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error holding %q", err, c.want)
			}
		})
	}
	if _, err := ParseKuredArgs("reboot-days=mo"); err == nil {
		t.Error("a word that is neither a flag nor a KURED_ variable was read")
	}
}

// kuredAllFlags are kured's flags (cmd/kured/main.go, kured 1.20), each with
// a sample value.
var kuredAllFlags = map[string]string{
	"node-id": "n1", "force-reboot": "false", "metrics-host": "0.0.0.0", "metrics-port": "8080", "drain-grace-period": "30",
	"drain-pod-selector": "app=x", "skip-wait-for-delete-timeout": "60", "drain-delay": "1m", "drain-timeout": "0", "reboot-delay": "1m",
	"reboot-method": "command", "period": "1h", "ds-namespace": "kube-system", "ds-name": "kured", "lock-annotation": "weave.works/kured-node-lock",
	"lock-ttl": "0", "lock-release-delay": "0", "prometheus-url": "http://p:9090", "alert-filter-regexp": "^W$", "alert-filter-match-only": "false",
	"alert-firing-only": "false", "reboot-sentinel": "/var/run/reboot-required", "prefer-no-schedule-taint": "x", "reboot-sentinel-command": "",
	"reboot-command": "/bin/systemctl reboot", "concurrency": "1", "reboot-signal": "39", "slack-hook-url": "", "slack-username": "kured",
	"slack-channel": "c", "notify-url": "", "message-template-uncordon": "m", "message-template-drain": "m", "message-template-reboot": "m",
	"blocking-pod-selector": "app=y", "reboot-days": "su,mo,tu,we,th,fr,sa", "start-time": "0:00", "end-time": "23:59:59", "time-zone": "UTC",
	"annotate-nodes": "false", "log-format": "text", "pre-reboot-node-labels": "a=b", "post-reboot-node-labels": "a=c",
}

// TestKuredEveryFlag: every flag of kured, given at its default or a sample,
// is in the report.
func TestKuredEveryFlag(t *testing.T) {
	flags := map[string][]string{}
	for k, v := range kuredAllFlags {
		flags[k] = []string{v}
	}
	res, err := Kured(flags, newPoolOpts())
	if err != nil {
		t.Fatal(err)
	}
	for name := range kuredAllFlags {
		found := false
		for _, e := range res.Report {
			found = found || strings.Contains(e.Field, "--"+name+",") || strings.HasSuffix(e.Field, "--"+name) || strings.Contains(e.Field, "--"+name+" ") || strings.Contains(e.Field, "--"+name+"[")
		}
		if !found {
			t.Errorf("--%s is not in the report", name)
		}
	}
	checkPools(t, "every flag", res.NodePools)
	if t.Failed() {
		t.Log(reportText(res))
	}
}
