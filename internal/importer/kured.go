package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// KuredOptions say what kured's flags cannot: which pool the settings go to.
type KuredOptions struct {
	// Base is the pool as it is in the cluster, when it exists: the
	// import sets its spec.reboot and its RebootRequired budget, and keeps
	// the rest.
	Base *v1alpha1.NodePool
	// Name, Selector and Provider make a new pool when Base is nil.
	Name     string
	Selector map[string]string
	Provider v1alpha1.ProviderSpec
}

// ParseKuredArgs reads kured's settings given as its flags (--reboot-days=mo,tu
// or --reboot-days mo,tu), as KURED_* environment variables, one or more a
// line, or as the kured Helm chart's configuration values (YAML, keys such as
// rebootDays), into flag name → values (a flag given twice, such as
// --blocking-pod-selector, keeps both).
func ParseKuredArgs(text string) (map[string][]string, error) {
	out := map[string][]string{}
	tokens, err := argTokens(text)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(tokens); i++ {
		t := tokens[i]
		var name, value string
		switch {
		case strings.HasPrefix(t, "-"):
			name = strings.TrimLeft(t, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				name, value = k, v
			} else if i+1 < len(tokens) && !strings.HasPrefix(tokens[i+1], "-") {
				value, i = tokens[i+1], i+1
			} else {
				value = "true"
			}
		case strings.HasPrefix(t, "KURED_") && strings.Contains(t, "="):
			k, v, _ := strings.Cut(strings.TrimPrefix(t, "KURED_"), "=")
			name, value = strings.ToLower(strings.ReplaceAll(k, "_", "-")), v
		default:
			return nil, fmt.Errorf("%q: not a kured flag (--reboot-days=mo,tu) or environment variable (KURED_REBOOT_DAYS=mo,tu)", t)
		}
		out[name] = append(out[name], value)
	}
	return out, nil
}

// KuredChartValues reads the kured Helm chart's configuration map (keys in
// camelCase, such as rebootDays or blockingPodSelector) into flag name →
// values.
func KuredChartValues(configuration map[string]any) map[string][]string {
	out := map[string][]string{}
	for k, v := range configuration {
		name := camelToKebab(k)
		switch x := v.(type) {
		case nil:
		case []any:
			for _, item := range x {
				out[name] = append(out[name], fmt.Sprint(item))
			}
			if name == "reboot-days" && len(x) > 0 {
				out[name] = []string{strings.Join(out[name], ",")}
			}
		default:
			if s := fmt.Sprint(x); s != "" {
				out[name] = append(out[name], s)
			}
		}
	}
	return out
}

// kuredDays are kured's day names (pkg/timewindow), to cron's day numbers.
var kuredDays = map[string]int{
	"su": 0, "sun": 0, "sunday": 0, "mo": 1, "mon": 1, "monday": 1, "tu": 2, "tue": 2, "tuesday": 2,
	"we": 3, "wed": 3, "wednesday": 3, "th": 4, "thu": 4, "thursday": 4, "fr": 5, "fri": 5, "friday": 5,
	"sa": 6, "sat": 6, "saturday": 6,
}

// Kured maps kured's flags to a sluice NodePool's spec.reboot and
// RebootRequired budget, and the chart values of the agent's sentinel check.
func Kured(flags map[string][]string, opts KuredOptions) (*Result, error) {
	res := &Result{Values: map[string]any{}, Report: []Entry{}}
	k := kuredFlags{in: flags, used: map[string]bool{}}
	pool, err := kuredPool(opts, &res.Report)
	if err != nil {
		return nil, err
	}
	rec := recorder{source: "kured flags", entries: &res.Report}
	set := func(path string, v any) { setValue(res.Values, strings.Split(path, "."), v) }
	rb := &v1alpha1.RebootSpec{}

	window, err := k.window(rec)
	if err != nil {
		return nil, err
	}
	if window != nil {
		rb.Windows = []v1alpha1.RebootWindow{*window}
	}
	for i, s := range k.all("blocking-pod-selector") {
		sel, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			return nil, fmt.Errorf("--blocking-pod-selector %q: %w", s, err)
		}
		rb.BlockingPodSelectors = append(rb.BlockingPodSelectors, *sel)
		rec.mapped(fmt.Sprintf("--blocking-pod-selector[%d]", i), fmt.Sprintf("spec.reboot.blockingPodSelectors[%d]", i))
	}
	if err := k.prometheus(rb, rec); err != nil {
		return nil, err
	}
	if err := k.concurrency(pool, rec); err != nil {
		return nil, err
	}
	if err := k.drainTimeout(pool, rec); err != nil {
		return nil, err
	}
	if err := k.agent(rec, set); err != nil {
		return nil, err
	}
	k.notMapped(rec)
	pool.Spec.Reboot = rb
	res.NodePools = []v1alpha1.NodePool{*pool}
	for _, name := range sortedKeys(flags) {
		if !k.used[name] {
			rec.notMapped("--"+name, "not a kured flag this importer knows (kured 1.20); check its spelling, or map it by hand")
		}
	}
	return res, nil
}

// kuredPool is the pool the settings go to: the cluster's, or a new one.
func kuredPool(opts KuredOptions, report *[]Entry) (*v1alpha1.NodePool, error) {
	if opts.Base != nil {
		p := opts.Base.DeepCopy()
		p.Status = v1alpha1.NodePoolStatus{}
		p.ManagedFields, p.ResourceVersion, p.UID, p.Generation, p.CreationTimestamp = nil, "", "", 0, metav1.Time{}
		if !p.Spec.Provider.Manages() || p.Spec.Provider.Name == v1alpha1.ProviderClusterAPI {
			return nil, fmt.Errorf("node pool %s has provider %s, which cannot reboot a node: sluice reboots through the pool's provider (kwok, aws-asg, azure-vmss, aks-agentpool, gcp-mig), so the API server refuses spec.reboot here", p.Name, p.Spec.Provider.NameOrNone())
		}
		return p, nil
	}
	if opts.Name == "" {
		return nil, fmt.Errorf("name the NodePool the reboot settings go to (--name): an existing pool, or a new one with --selector and --provider")
	}
	if len(opts.Selector) == 0 {
		return nil, fmt.Errorf("node pool %s is not in the cluster (or no cluster was reached): give --selector, the labels of the nodes kured reboots (its DaemonSet's nodeSelector), to make a new pool", opts.Name)
	}
	if !opts.Provider.Manages() || opts.Provider.Name == v1alpha1.ProviderClusterAPI {
		return nil, fmt.Errorf("--provider %s cannot reboot a node: kured reboots in place from the node, sluice through the pool's provider (kwok, aws-asg, azure-vmss, aks-agentpool, gcp-mig); give --provider and --provider-settings", opts.Provider.NameOrNone())
	}
	p := newNodePool(opts.Name)
	p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: opts.Selector}
	p.Spec.Provider = opts.Provider
	recorder{source: "NodePool " + opts.Name, entries: report}.mappedBecause("(the pool)", "spec.nodeSelector, spec.provider", "--selector and --provider: kured runs wherever its DaemonSet does; a sluice pool names its nodes and its provider")
	return p, nil
}

// kuredFlags reads the flags, noting which were read.
type kuredFlags struct {
	in   map[string][]string
	used map[string]bool
}

func (k *kuredFlags) all(name string) []string {
	k.used[name] = true
	return k.in[name]
}

// last is the flag's value (the last given wins, as in pflag), and whether
// it was given.
func (k *kuredFlags) last(name string) (string, bool) {
	v := k.all(name)
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func (k *kuredFlags) boolean(name string) (bool, error) {
	v, ok := k.last(name)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("--%s %q: must be true or false", name, v)
	}
	return b, nil
}

func (k *kuredFlags) duration(name string) (time.Duration, bool, error) {
	v, ok := k.last(name)
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, false, fmt.Errorf("--%s %q: use a duration such as 1h or 30m", name, v)
	}
	return d, true, nil
}

// window maps --reboot-days, --start-time, --end-time and --time-zone to a
// reboot window: a cron schedule on the days at the start time, open until
// the end time.
func (k *kuredFlags) window(rec recorder) (*v1alpha1.RebootWindow, error) {
	daysArg, daysSet := k.last("reboot-days")
	startArg, startSet := k.last("start-time")
	endArg, endSet := k.last("end-time")
	zone, zoneSet := k.last("time-zone")
	if !zoneSet {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("--time-zone %q: not an IANA time zone (such as Europe/Berlin): %w", zone, err)
	}
	if !daysSet {
		daysArg = "su,mo,tu,we,th,fr,sa"
	}
	days, err := kuredWeekdays(daysArg)
	if err != nil {
		return nil, err
	}
	start, end, err := kuredTimes(startArg, startSet, endArg, endSet)
	if err != nil {
		return nil, err
	}
	everyDay := !slices.Contains(days, false)
	if everyDay && start == 0 && end >= 24*time.Hour-time.Second {
		field := "--reboot-days, --start-time, --end-time (any day, any time)"
		if zoneSet {
			field += ", --time-zone"
		}
		rec.mappedBecause(field, "spec.reboot.windows (none)", "reboots may start at any time")
		return nil, nil
	}
	length := end - start
	wraps := end < start
	if wraps {
		length += 24 * time.Hour
	}
	if end%time.Minute == 59*time.Second {
		length += time.Second // kured's end is inclusive to its last second: 23:59:59 means until midnight
	}
	if length < time.Minute {
		return nil, fmt.Errorf("--start-time %s and --end-time %s leave a window shorter than a minute", startArg, endArg)
	}
	w := &v1alpha1.RebootWindow{
		Schedule: fmt.Sprintf("%d %d * * %s", int(start.Minutes())%60, int(start.Hours()), cronWeekdays(days)),
		Duration: metav1.Duration{Duration: length.Truncate(time.Minute)},
	}
	if loc.String() != "UTC" {
		z := loc.String()
		w.TimeZone = &z
	}
	rec.mapped("--reboot-days, --start-time, --end-time", "spec.reboot.windows[0].schedule, duration")
	if zoneSet {
		rec.mapped("--time-zone", "spec.reboot.windows[0].timeZone")
	}
	if start%time.Minute != 0 || length%time.Minute != 0 {
		rec.differs("--start-time, --end-time (seconds)", "spec.reboot.windows[0]", "a cron schedule opens on the minute: the window starts at the minute and is cut to whole minutes")
	}
	if wraps {
		rec.differs("--start-time after --end-time (past midnight)", "spec.reboot.windows[0]", "kured tests the day it is now, so the hours after midnight belong to the next day's window; sluice's window opens on the listed days and runs on past midnight")
	}
	rec.differs("--reboot-days, --start-time, --end-time (a reboot in progress)", "spec.reboot.windows",
		"both only start reboots inside the window; a drain begun inside may finish after it closes")
	return w, nil
}

// kuredWeekdays reads --reboot-days (kured's names or 0-6, comma
// separated) into a set indexed by cron's day numbers.
func kuredWeekdays(arg string) ([]bool, error) {
	days := make([]bool, 7)
	named := false
	for _, d := range strings.Split(arg, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		n, ok := kuredDays[strings.ToLower(d)]
		if !ok {
			var err error
			if n, err = strconv.Atoi(d); err != nil || n < 0 || n > 6 {
				return nil, fmt.Errorf("--reboot-days: %q is not a day: use su, mo, tu, we, th, fr, sa (or sun..., sunday..., 0-6)", d)
			}
		}
		days[n], named = true, true
	}
	if !named {
		return nil, fmt.Errorf("--reboot-days %q names no day", arg)
	}
	return days, nil
}

// cronWeekdays writes the set as cron's day-of-week field.
func cronWeekdays(days []bool) string {
	if !slices.Contains(days, false) {
		return "*"
	}
	var dow []string
	for i, on := range days {
		if on {
			dow = append(dow, strconv.Itoa(i))
		}
	}
	return strings.Join(dow, ",")
}

// kuredTimes reads --start-time and --end-time, with kured's defaults.
func kuredTimes(startArg string, startSet bool, endArg string, endSet bool) (start, end time.Duration, err error) {
	if !startSet {
		startArg = "0:00"
	}
	if !endSet {
		endArg = "23:59:59"
	}
	if start, err = kuredTime(startArg); err != nil {
		return 0, 0, fmt.Errorf("--start-time %q: use a time of day such as 2:00, 14:30 or 3pm", startArg)
	}
	if end, err = kuredTime(endArg); err != nil {
		return 0, 0, fmt.Errorf("--end-time %q: use a time of day such as 6:00, 17:30 or 5pm", endArg)
	}
	return start, end, nil
}

// kuredTime reads a time of day in kured's formats.
func kuredTime(s string) (time.Duration, error) {
	for _, f := range []string{"15:04", "15:04:05", "03:04pm", "15", "03pm", "3pm"} {
		if t, err := time.Parse(f, s); err == nil {
			return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second, nil
		}
	}
	return 0, fmt.Errorf("not a time of day")
}

func (k *kuredFlags) prometheus(rb *v1alpha1.RebootSpec, rec recorder) error {
	url, ok := k.last("prometheus-url")
	filter, hasFilter := k.last("alert-filter-regexp")
	matchOnly, err := k.boolean("alert-filter-match-only")
	if err != nil {
		return err
	}
	firingOnly, err := k.boolean("alert-firing-only")
	if err != nil {
		return err
	}
	if !ok || url == "" {
		if hasFilter || matchOnly || firingOnly {
			rec.notMapped("--alert-filter-regexp, --alert-filter-match-only, --alert-firing-only", "given without --prometheus-url, so kured checks no alerts")
		}
		return nil
	}
	if _, err := regexp.Compile(filter); err != nil {
		return fmt.Errorf("--alert-filter-regexp %q: %w", filter, err)
	}
	rb.Prometheus = &v1alpha1.PrometheusAlerts{URL: url, AlertFilterRegexp: filter, AlertFilterMatchOnly: matchOnly, FiringOnly: firingOnly}
	rec.differs("--prometheus-url", "spec.reboot.prometheus.url", "the same filter semantics; sluice also holds reboots while Prometheus does not answer (not knowing is not all clear), and trusts an answer for 30s")
	if hasFilter {
		rec.mapped("--alert-filter-regexp", "spec.reboot.prometheus.alertFilterRegexp")
	}
	if _, given := k.in["alert-filter-match-only"]; given {
		rec.mapped("--alert-filter-match-only", "spec.reboot.prometheus.alertFilterMatchOnly")
	}
	if _, given := k.in["alert-firing-only"]; given {
		rec.mapped("--alert-firing-only", "spec.reboot.prometheus.firingOnly")
	}
	return nil
}

// concurrency becomes the pool's budget for RebootRequired, replacing one
// the pool had for that reason alone.
func (k *kuredFlags) concurrency(pool *v1alpha1.NodePool, rec recorder) error {
	v, given := k.last("concurrency")
	if !given {
		v = "1"
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("--concurrency %q: must be a number of nodes, 1 or more", v)
	}
	if pool.Spec.Disruption == nil {
		pool.Spec.Disruption = &v1alpha1.DisruptionSpec{}
	}
	d := pool.Spec.Disruption
	if len(d.Budgets) == 0 {
		d.Budgets = []v1alpha1.Budget{v1alpha1.DefaultBudget}
		rec.mappedBecause("--concurrency (the pool's other budgets)", "spec.disruption.budgets[0]", "the pool had no budget, so sluice's default (10%) is written out: a budget for RebootRequired alone would otherwise leave every other reason unbudgeted")
	}
	d.Budgets = slices.DeleteFunc(d.Budgets, func(b v1alpha1.Budget) bool {
		return b.Schedule == nil && len(b.Reasons) == 1 && b.Reasons[0] == v1alpha1.ReasonRebootRequired
	})
	d.Budgets = append(d.Budgets, v1alpha1.Budget{Nodes: strconv.Itoa(n), Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonRebootRequired}})
	field := "--concurrency"
	if !given {
		field = "--concurrency (unset: kured's default 1)"
	}
	rec.differs(field, fmt.Sprintf("spec.disruption.budgets[%d] (nodes %d, reasons [RebootRequired])", len(d.Budgets)-1, n),
		"kured counts only its own reboots, cluster-wide; sluice's budget is per pool and every node of the pool out of service for any reason counts against it (a drain, a replacement, a NotReady node), and the pool's other budgets still apply")
	return nil
}

func (k *kuredFlags) drainTimeout(pool *v1alpha1.NodePool, rec recorder) error {
	timeout, given, err := k.duration("drain-timeout")
	if err != nil {
		return err
	}
	force, err := k.boolean("force-reboot")
	if err != nil {
		return err
	}
	switch {
	case given && timeout > 0 && force:
		pool.Spec.Disruption.TerminationGracePeriod = &metav1.Duration{Duration: timeout}
		rec.differs("--drain-timeout with --force-reboot", "spec.disruption.terminationGracePeriod",
			"kured reboots after the timeout whatever is left; sluice deletes the pods still there (PodDisruptionBudgets or not) and goes on, and the period bounds every drain of the pool, not only reboots")
	case given && timeout > 0:
		rec.notMapped("--drain-timeout", "kured gives up the reboot after it and tries again later; sluice keeps draining while PodDisruptionBudgets hold (explain node names the pod); a bound that forces the drain is spec.disruption.terminationGracePeriod")
	case force:
		rec.notMapped("--force-reboot", "without --drain-timeout it reboots when the drain fails; sluice never reboots a node it has not drained")
	default:
		var off []string
		for _, name := range []string{"drain-timeout", "force-reboot"} {
			if _, ok := k.in[name]; ok {
				off = append(off, "--"+name)
			}
		}
		if len(off) > 0 {
			rec.mappedBecause(strings.Join(off, ", ")+" (off)", "(default)", "no bound on the drain: sluice's too, unless spec.disruption.terminationGracePeriod is set")
		}
	}
	return nil
}

// agent maps the sentinel check, which sluice's agent does on each node.
func (k *kuredFlags) agent(rec recorder, set func(string, any)) error {
	if v, ok := k.last("reboot-sentinel"); ok {
		set("agent.reboot.sentinel", v)
		rec.mapped("--reboot-sentinel", "values: agent.reboot.sentinel")
	}
	if v, ok := k.last("reboot-sentinel-command"); ok && v != "" {
		set("agent.reboot.sentinelCommand", v)
		rec.differs("--reboot-sentinel-command", "values: agent.reboot.sentinelCommand", "run in the agent's container, not in the host's namespaces as kured runs it: a command that reads the host (needs-restarting, a file under /var/run) must find it there")
	} else if ok {
		rec.mappedBecause("--reboot-sentinel-command (empty)", "(default)", "the sentinel file decides, as in kured")
	}
	period, given, err := k.duration("period")
	if err != nil {
		return err
	}
	if given {
		if period < 5*time.Second {
			return fmt.Errorf("--period %s: sluice's agent checks at most every 5s (agent.reboot.checkPeriod)", period)
		}
		set("agent.reboot.checkPeriod", period.String())
		rec.mapped("--period", "values: agent.reboot.checkPeriod")
	} else {
		rec.differs("--period (unset: kured's default 1h)", "values: agent.reboot.checkPeriod", "sluice's agent checks the sentinel every minute by default; kured also waits a period between one node's reboot and the next, which sluice does not (the budget paces reboots)")
	}
	if v, ok := k.last("log-format"); ok {
		set("logFormat", v)
		rec.mapped("--log-format", "values: logFormat")
	}
	if v, ok := k.last("slack-hook-url"); ok && v != "" {
		set("controller.webhook.url", v)
		rec.differs("--slack-hook-url", "values: controller.webhook.url", "sluice posts every Event its controller records, reboots among them, as JSON with a Slack-style text field")
	} else if ok {
		rec.mappedBecause("--slack-hook-url (empty)", "(default)", "no webhook")
	}
	if _, given := k.in["annotate-nodes"]; given {
		b, err := k.boolean("annotate-nodes")
		if err != nil {
			return err
		}
		field := "--annotate-nodes"
		if !b {
			field += " (false)"
		}
		rec.mappedBecause(field, "(always)", "sluice always records a reboot on its node ("+contract.AnnotationRebootRequired+", "+contract.AnnotationDisruption+")")
	}
	return nil
}

// kuredNotMapped are kured's flags sluice has no equivalent for, and why.
var kuredNotMapped = map[string]string{
	"lock-ttl":                     "kured's lock can outlive a node that died holding it; sluice has no lock: a reboot in progress is recorded on its node and counted by the budget, and a node not back within spec.reboot.timeout (default 15m) is handed to repair",
	"lock-release-delay":           "sluice starts the next reboot as soon as the budget has room; to space reboots out, lower the budget",
	"lock-annotation":              "sluice has no lock",
	"ds-name":                      "sluice has no lock",
	"ds-namespace":                 "sluice has no lock",
	"reboot-method":                "sluice reboots through the pool's provider (the cloud's API), not a command on the host",
	"reboot-command":               "sluice reboots through the pool's provider (the cloud's API), not a command on the host",
	"reboot-signal":                "sluice reboots through the pool's provider (the cloud's API), not a signal to the host",
	"drain-grace-period":           "sluice gives each pod its own terminationGracePeriodSeconds",
	"drain-pod-selector":           "sluice drains every pod but DaemonSet pods",
	"skip-wait-for-delete-timeout": "sluice waits for every evicted pod to go",
	"drain-delay":                  "sluice drains as soon as the reboot starts",
	"reboot-delay":                 "sluice reboots as soon as the node is drained",
	"prefer-no-schedule-taint":     "sluice cordons a node when its reboot starts; no taint beforehand",
	"slack-username":               "sluice's webhook body is set by controller.webhook.template",
	"slack-channel":                "sluice's webhook body is set by controller.webhook.template",
	"notify-url":                   "a shoutrrr URL; sluice posts to a plain HTTP(S) URL (controller.webhook.url)",
	"message-template-drain":       "sluice's webhook body is set by controller.webhook.template, over each Event",
	"message-template-reboot":      "sluice's webhook body is set by controller.webhook.template, over each Event",
	"message-template-uncordon":    "sluice's webhook body is set by controller.webhook.template, over each Event",
	"pre-reboot-node-labels":       "sluice labels nothing around a reboot; its record is " + contract.AnnotationDisruption,
	"post-reboot-node-labels":      "sluice labels nothing around a reboot; its record is " + contract.AnnotationDisruption,
	"metrics-host":                 "sluice's metrics are served by its controller and agent (controller.metricsPort, agent.metricsPort)",
	"metrics-port":                 "sluice's metrics are served by its controller and agent (controller.metricsPort, agent.metricsPort)",
	"node-id":                      "each agent reads its own node's name",
}

func (k *kuredFlags) notMapped(rec recorder) {
	for _, name := range sortedKeys(kuredNotMapped) {
		if _, ok := k.in[name]; ok {
			k.used[name] = true
			rec.notMapped("--"+name, kuredNotMapped[name])
		}
	}
}

// camelToKebab turns "rebootDays" into "reboot-days".
func camelToKebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
