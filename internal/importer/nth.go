package importer

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// nthKeyByFlag holds the flags and environment variables of
// aws-node-termination-handler (v1.25, chart 0.27) whose chart values key is
// not the flag's name in camelCase.
var nthKeyByFlag = map[string]string{
	"queue-url":                        "queueURL",
	"webhook-url":                      "webhookURL",
	"enable-asg-lifecycle-draining":    "enableASGLifecycleDraining",
	"check-asg-tag-before-draining":    "checkASGTagBeforeDraining",
	"metadata-url":                     "instanceMetadataURL",
	"instance-metadata-url":            "instanceMetadataURL",
	"uptime-from-file":                 "procUptimeFile",
	"enable-sqs-termination-draining":  "enableSqsTerminationDraining",
	"delete-sqs-msg-if-node-not-found": "deleteSqsMsgIfNodeNotFound",
}

// ParseNTHArgs reads aws-node-termination-handler's settings given as its
// command-line flags (--queue-url=URL or --queue-url URL) or environment
// variables (QUEUE_URL=URL), one or more a line, as a container's args or
// env would list them, into chart values keys. Lines starting with # and
// YAML list dashes are ignored.
func ParseNTHArgs(text string) (map[string]any, error) {
	values := map[string]any{}
	tokens, err := argTokens(text)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(tokens); i++ {
		t := tokens[i]
		var name, value string
		switch {
		case strings.HasPrefix(t, "--") || strings.HasPrefix(t, "-"):
			name = strings.TrimLeft(t, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				name, value = k, v
			} else if i+1 < len(tokens) && !strings.HasPrefix(tokens[i+1], "-") {
				value, i = tokens[i+1], i+1
			} else {
				value = "true" // a boolean flag given alone
			}
		case strings.Contains(t, "="):
			k, v, _ := strings.Cut(t, "=")
			if k != strings.ToUpper(k) {
				return nil, fmt.Errorf("%q: an environment variable is upper case (QUEUE_URL=...), a flag starts with -- (--queue-url=...)", t)
			}
			name, value = strings.ToLower(strings.ReplaceAll(k, "_", "-")), v
		default:
			return nil, fmt.Errorf("%q: not a flag (--name=value) or an environment variable (NAME=value)", t)
		}
		key, ok := nthKeyByFlag[name]
		if !ok {
			key = kebabToCamel(name)
		}
		values[key] = value
	}
	return values, nil
}

// NTH maps an aws-node-termination-handler Helm release's values (or its
// flags, read by ParseNTHArgs) to sluice chart values. Settings sluice keeps
// per NodePool (which maintenance events drain, cordon only) are reported
// with the pool field to set.
func NTH(in map[string]any) (*Result, error) {
	n := nthValues{in: in, used: map[string]bool{}}
	res := &Result{Values: map[string]any{}, Report: []Entry{}}
	rec := recorder{source: "values", entries: &res.Report}
	set := func(path string, v any) { setValue(res.Values, strings.Split(path, "."), v) }

	queue, err := n.bool("enableSqsTerminationDraining", false)
	if err != nil {
		return nil, err
	}
	url := n.str("queueURL")
	switch {
	case queue && url == "":
		return nil, fmt.Errorf("enableSqsTerminationDraining is true but queueURL is empty: give the SQS queue's URL (queueURL, --queue-url or QUEUE_URL)")
	case queue:
		set("controller.awsQueueURL", url)
		set("agent.enabled", false)
		rec.mappedBecause("enableSqsTerminationDraining, queueURL", "values: controller.awsQueueURL, agent.enabled=false",
			"the controller reads the same EventBridge events from the same queue (spot interruption, rebalance, state change, AWS Health scheduled change, ASG terminate lifecycle action): keep the queue and its rules, and let sluice read it; run the queue mode or the agent on a node, not both (docs/providers.md#the-aws-queue-mode). The agent also reports OS reboots; to have that, enable it with agent.nodeSelector on nodes the queue does not cover")
	default:
		if url != "" {
			rec.notMapped("queueURL", "given without enableSqsTerminationDraining, so NTH runs in IMDS mode and does not read it")
		}
		set("agent.enabled", true)
		rec.mappedBecause(n.label("enableSqsTerminationDraining")+" (false: IMDS mode)", "values: agent.enabled", "sluice's agent, one per node, reads the instance metadata service as NTH's DaemonSet does")
	}

	n.events(rec)
	n.drain(rec)
	n.webhook(rec, set)
	n.aws(rec, set)
	n.pods(rec, set, queue)
	n.misc(rec, set)
	for _, k := range sortedKeys(in) {
		if !n.used[k] {
			rec.notMapped(k, "not a value of NTH's chart (0.27) or flag this importer knows; check its spelling, or map it by hand")
		}
	}
	return res, n.err
}

// nthValues reads NTH's values, noting which were read.
type nthValues struct {
	in   map[string]any
	used map[string]bool
	env  []any
	err  error
}

// offToo reports an opt-in NTH setting given as false, which sluice's
// default matches.
func (n *nthValues) offToo(rec recorder, key, why string) {
	if n.has(key) {
		rec.mappedBecause(key+" (false)", "(default)", why)
	}
}

// label is the key as the report names it: marked when NTH's default
// stands in for a value not given.
func (n *nthValues) label(key string) string {
	if v, ok := n.in[key]; !ok || v == nil || v == "" {
		return key + " (unset: NTH's default)"
	}
	return key
}

func (n *nthValues) has(key string) bool {
	v, ok := n.in[key]
	n.used[key] = true
	return ok && v != nil && v != ""
}

func (n *nthValues) str(key string) string {
	n.used[key] = true
	switch v := n.in[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// bool reads a boolean value; unset or "" (the old chart's way of saying
// "the default") is def.
func (n *nthValues) bool(key string, def bool) (bool, error) {
	n.used[key] = true
	switch v := n.in[key].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		if v == "" {
			return def, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s %q: must be true or false", key, v)
		}
		return b, nil
	}
	return false, fmt.Errorf("%s %v: must be true or false", key, n.in[key])
}

func (n *nthValues) mustBool(key string, def bool) bool {
	b, err := n.bool(key, def)
	if err != nil && n.err == nil {
		n.err = err
	}
	return b
}

// events maps which notices NTH acts on to sluice's maintenance actions,
// which are per NodePool.
func (n *nthValues) events(rec recorder) {
	const pools = "spec.maintenance.actions (each NodePool)"
	if !n.mustBool("enableSpotInterruptionDraining", true) {
		rec.notMapped("enableSpotInterruptionDraining (false)", "sluice drains on a spot interruption by default; to match, set spec.maintenance.actions.Preempt: None on the pools of these nodes")
	} else {
		rec.mappedBecause(n.label("enableSpotInterruptionDraining"), pools, "sluice's default: Preempt drains, before the interruption's deadline")
	}
	if !n.mustBool("enableScheduledEventDraining", true) {
		rec.notMapped("enableScheduledEventDraining (false)", "sluice drains on a scheduled retirement or stop by default; to match, set spec.maintenance.actions.Terminate: None on the pools")
	} else {
		rec.differs(n.label("enableScheduledEventDraining"), pools, "NTH drains before every scheduled event; sluice's defaults drain before a retirement or stop (Terminate) but not before a reboot or system maintenance (Reboot and Maintenance: None): set those to Drain on the pools to match")
	}
	if !n.mustBool("enableASGLifecycleDraining", true) {
		rec.notMapped("enableASGLifecycleDraining (false)", "sluice drains a node its Auto Scaling group is terminating by default; to match, set spec.maintenance.actions.Terminate: None on the pools")
	} else {
		rec.mappedBecause(n.label("enableASGLifecycleDraining"), pools, "sluice's default: an Auto Scaling group's termination is Terminate, which drains; in queue mode sluice also holds the terminate lifecycle hook until the node is drained")
	}
	if n.mustBool("enableRebalanceMonitoring", false) {
		rec.mappedBecause(n.label("enableRebalanceMonitoring"), pools, "sluice's default: Rebalance cordons")
	} else {
		rec.differs(n.label("enableRebalanceMonitoring")+" (false)", pools, "sluice cordons on a rebalance recommendation by default; to match, set spec.maintenance.actions.Rebalance: None on the pools")
	}
	if n.mustBool("enableRebalanceDraining", false) {
		rec.notMapped("enableRebalanceDraining", "sluice refuses to drain on a rebalance recommendation (a hint that may never become an interruption); it cordons, and drains on the interruption notice that may follow")
	} else if n.has("enableRebalanceDraining") {
		rec.mappedBecause("enableRebalanceDraining (false)", "(always)", "sluice never drains on a rebalance recommendation")
	}
	if n.mustBool("cordonOnly", false) {
		rec.notMapped("cordonOnly", "per pool in sluice: set spec.maintenance.actions Preempt, Terminate and Redeploy to Cordon on the pools of these nodes")
	} else {
		n.offToo(rec, "cordonOnly", "sluice drains, as NTH does without it")
	}
	if n.mustBool("taintNode", false) {
		rec.differs("taintNode", "(always)", "sluice always taints a node it drains for maintenance "+contract.TaintMaintenance+"=<event type>:PreferNoSchedule (the cordon keeps pods off); NTH's aws-node-termination-handler/* taint keys are not used")
	} else if n.has("taintNode") {
		rec.differs("taintNode (false)", "(always)", "sluice always taints a node it drains for maintenance "+contract.TaintMaintenance+"=<event type>:PreferNoSchedule, a hint for tools that keeps nothing off the node")
	}
	if n.has("taintEffect") {
		rec.notMapped("taintEffect", "sluice's maintenance taint is always PreferNoSchedule: NoSchedule would also keep off the DaemonSet pods that tolerate the cordon")
	}
	if n.mustBool("enableOutOfServiceTaint", false) {
		rec.notMapped("enableOutOfServiceTaint", "sluice does not add node.kubernetes.io/out-of-service; it deletes the pods a deadline leaves (spec.maintenance.onDeadline: Delete)")
	} else {
		n.offToo(rec, "enableOutOfServiceTaint", "sluice does not add it either")
	}
	if n.mustBool("excludeFromLoadBalancers", false) {
		rec.notMapped("excludeFromLoadBalancers", "sluice does not label nodes node.kubernetes.io/exclude-from-external-load-balancers")
	} else {
		n.offToo(rec, "excludeFromLoadBalancers", "sluice does not either")
	}
}

// drain maps how NTH drains.
func (n *nthValues) drain(rec recorder) {
	if n.mustBool("deleteLocalData", true) {
		rec.differs(n.label("deleteLocalData"), "spec.maintenance.forceEvict (each NodePool)", "sluice evicts pods with emptyDir data, and pods no controller owns, for Preempt and Terminate by default (WhenNodeGoesAway), where the data goes with the machine; set forceEvict: Always to do so for every event, as NTH does")
	} else {
		rec.notMapped("deleteLocalData (false)", "set spec.maintenance.forceEvict: Never on the pools to leave pods with emptyDir data; the drain then reports them")
	}
	if n.mustBool("ignoreDaemonSets", true) {
		rec.mappedBecause(n.label("ignoreDaemonSets"), "(always)", "sluice's drain always leaves DaemonSet pods")
	} else {
		rec.notMapped("ignoreDaemonSets (false)", "sluice's drain always leaves DaemonSet pods: their controller would put them back at once")
	}
	for _, k := range []string{"podTerminationGracePeriod", "gracePeriod"} {
		switch v := n.str(k); v {
		case "":
		case "-1":
			rec.mappedBecause(k, "(always)", "each pod's own terminationGracePeriodSeconds, as sluice always gives it")
		default:
			rec.notMappedf(k, "%s s for every pod: sluice gives each pod its own terminationGracePeriodSeconds, cut short only by the event's deadline", v)
		}
	}
	if v := n.str("nodeTerminationGracePeriod"); v != "" {
		rec.differs("nodeTerminationGracePeriod", "spec.maintenance.deadlineMargin (each NodePool)", "sluice's drain runs to the event's own deadline less deadlineMargin (default 5s), then deletes what budgets still hold (onDeadline: Delete); there is no per-node period to set")
	}
}

func (n *nthValues) webhook(rec recorder, set func(string, any)) {
	if v := n.str("webhookURL"); v != "" {
		set("controller.webhook.url", v)
		rec.differs("webhookURL", "values: controller.webhook.url", "sluice posts every Event its controller records (cordons, drains, blockers, deadlines), not only interruptions")
	}
	if v := n.str("webhookURLSecretName"); v != "" {
		n.addEnv(set, map[string]any{"name": "SLUICE_WEBHOOK_URL", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": v, "key": "webhookurl"}}})
		rec.mappedBecause("webhookURLSecretName", "values: controller.env SLUICE_WEBHOOK_URL", "the controller reads the URL from SLUICE_WEBHOOK_URL, taken from the same secret and key (webhookurl)")
	}
	var templates []string
	for _, k := range []string{"webhookTemplate", "webhookTemplateConfigMapName", "webhookTemplateConfigMapKey"} {
		if n.has(k) {
			templates = append(templates, k)
		}
	}
	if len(templates) > 0 {
		rec.notMapped(strings.Join(templates, ", "), "NTH's template fields (.EventID, .Kind, .InstanceID, .NodeName, .Description, .StartTime) are not sluice's (.Kind .Name .Namespace .Type .Reason .Message .Time, func json): rewrite it as controller.webhook.template; the default body is JSON with a Slack-style text field")
	}
	if n.has("webhookHeaders") {
		rec.notMapped("webhookHeaders", "sluice's webhook sends Content-Type: application/json and no other header")
	}
	if n.has("webhookProxy") {
		rec.notMapped("webhookProxy", "sluice's webhook has no proxy setting of its own")
	}
}

func (n *nthValues) aws(rec recorder, set func(string, any)) {
	if v := n.str("awsRegion"); v != "" {
		n.addEnv(set, map[string]any{"name": "AWS_REGION", "value": v})
		rec.mapped("awsRegion", "values: controller.env AWS_REGION")
	}
	if n.has("awsEndpoint") {
		rec.notMapped("awsEndpoint", "for testing against an emulator; sluice's equivalent is AWS_ENDPOINT_URL in controller.env (the AWS SDK's own variable)")
	}
	if n.has("awsAccessKeyID") || n.has("awsSecretAccessKey") {
		rec.notMapped("awsAccessKeyID, awsSecretAccessKey", "static keys for testing; give the controller a role (IRSA or EKS Pod Identity) through controller.serviceAccountAnnotations")
	}
	for _, k := range []string{"checkASGTagBeforeDraining", "checkTagBeforeDraining", "managedAsgTag", "managedTag"} {
		if n.has(k) {
			rec.notMapped(k, "sluice acts on every notice for an instance that is a node of this cluster; limit what it drains per NodePool (spec.maintenance.actions) instead of by an instance tag")
		}
	}
	if n.has("deleteSqsMsgIfNodeNotFound") {
		rec.mappedBecause("deleteSqsMsgIfNodeNotFound", "(always)", "sluice always deletes a message for an instance that is no node of this cluster")
	}
	if n.has("useProviderId") {
		rec.mappedBecause("useProviderId", "(always)", "sluice always finds the node by its spec.providerID")
	}
	if hi, hu := n.has("heartbeatInterval"), n.has("heartbeatUntil"); hi || hu {
		rec.differs("heartbeatInterval, heartbeatUntil", "(automatic)", "sluice heartbeats a terminate lifecycle hook at half the hook's own heartbeat timeout for as long as the node drains, and completes it once drained")
	}
	if n.has("completeLifecycleActionDelaySeconds") {
		rec.notMapped("completeLifecycleActionDelaySeconds", "sluice completes the lifecycle action once the node is drained, with no delay")
	}
	if n.has("sqsMsgVisibilityTimeoutSec") {
		rec.notMapped("sqsMsgVisibilityTimeoutSec", "sluice's queue reader keeps the queue's own visibility timeout")
	}
	if n.has("workers") {
		rec.notMapped("workers", "NTH's parallel event processors; sluice's controller.workers (default 64) is nodes reconciled at once, a different count: keep sluice's")
	}
	if n.has("replicas") {
		rec.notMapped("replicas", "sluice runs controller.replicas (default 2) with leader election: one reads the queue")
	}
	if n.has("metadataTries") {
		rec.notMapped("metadataTries", "sluice's agent polls the metadata service every agent.pollInterval and rides out failed reads")
	}
	if v := n.str("instanceMetadataURL"); v != "" {
		set("agent.imdsEndpoint", v)
		rec.mapped("instanceMetadataURL", "values: agent.imdsEndpoint")
	}
}

// addEnv adds a variable to controller.env, which several settings feed.
func (n *nthValues) addEnv(set func(string, any), v map[string]any) {
	n.env = append(n.env, v)
	set("controller.env", n.env)
}

func (n *nthValues) pods(rec recorder, set func(string, any), queue bool) {
	target := "agent"
	if queue {
		target = "controller"
	}
	n.serviceAccount(rec, set)
	for _, k := range []string{"nodeSelector", "daemonsetNodeSelector", "linuxNodeSelector"} {
		if m, ok := n.in[k].(map[string]any); ok && len(m) > 0 {
			t := target
			if k != "nodeSelector" {
				t = "agent"
			}
			set(t+".nodeSelector", m)
			rec.mapped(k, "values: "+t+".nodeSelector")
		}
		n.used[k] = true
	}
	for _, k := range []string{"tolerations", "daemonsetTolerations", "linuxTolerations"} {
		if l, ok := n.in[k].([]any); ok && len(l) > 0 {
			t := target
			if k != "tolerations" {
				t = "agent"
			}
			set(t+".tolerations", l)
			rec.mapped(k, "values: "+t+".tolerations")
		}
		n.used[k] = true
	}
	if v := n.str("priorityClassName"); v != "" && queue {
		set("controller.priorityClassName", v)
		rec.mapped("priorityClassName", "values: controller.priorityClassName")
	} else if v != "" {
		rec.notMapped("priorityClassName", "the Deployment's priority in queue mode; sluice's agent keeps agent.priorityClassName (system-node-critical)")
	}
	if v := n.str("daemonsetPriorityClassName"); v != "" {
		set("agent.priorityClassName", v)
		rec.mapped("daemonsetPriorityClassName", "values: agent.priorityClassName")
	}
	if l, ok := n.in["podLabels"].(map[string]any); ok && len(l) > 0 {
		if queue {
			set("controller.podLabels", l)
			rec.mapped("podLabels", "values: controller.podLabels")
		} else {
			rec.notMapped("podLabels", "labels of NTH's own pods; sluice's agent pods take no extra labels (controller.podLabels is the controller's)")
		}
	}
	n.used["podLabels"] = true
}

// serviceAccount maps the role NTH's service account carries.
func (n *nthValues) serviceAccount(rec recorder, set func(string, any)) {
	if sa, ok := n.in["serviceAccount"].(map[string]any); ok {
		n.used["serviceAccount"] = true
		if ann, ok := sa["annotations"].(map[string]any); ok && len(ann) > 0 {
			set("controller.serviceAccountAnnotations", ann)
			rec.differs("serviceAccount.annotations", "values: controller.serviceAccountAnnotations", "the same role (IRSA) for sluice's controller: it needs sluice's permissions, docs/providers.md#the-aws-queue-mode (sqs:ReceiveMessage, sqs:DeleteMessage, autoscaling:CompleteLifecycleAction, autoscaling:RecordLifecycleActionHeartbeat, autoscaling:DescribeLifecycleHooks)")
		}
		for _, k := range sortedKeys(sa) {
			if k != "annotations" {
				rec.notMapped("serviceAccount."+k, "the sluice chart creates its own service accounts")
			}
		}
	}
}

// nthPlumbing are NTH's chart values for its own pods and image, which say
// nothing about how nodes are handled.
var nthPlumbing = []string{
	"image", "nameOverride", "fullnameOverride", "rbac", "customLabels", "podAnnotations", "podSecurityContext",
	"securityContext", "terminationGracePeriodSeconds", "resources", "affinity", "topologySpreadConstraints", "extraEnv",
	"probes", "strategy", "podDisruptionBudget", "targetNodeOs", "linuxPodLabels", "windowsPodLabels", "linuxPodAnnotations",
	"windowsPodAnnotations", "updateStrategy", "useHostNetwork", "dnsPolicy", "dnsConfig", "linuxDnsPolicy", "windowsDnsPolicy",
	"windowsNodeSelector", "daemonsetAffinity", "linuxAffinity", "windowsAffinity", "windowsTolerations", "enableProbesServer",
	"probesServerPort", "probesServerEndpoint", "procUptimeFile", "kubernetesServiceHost", "kubernetesServicePort",
	"nodeSelectorTermsOs", "nodeSelectorTermsArch", "linuxUpdateStrategy", "windowsUpdateStrategy", "nodeName", "podName",
	"podNamespace", "kubeApiQps", "kubeApiBurst", "logFormatVersion", "useApiserverCache",
}

func (n *nthValues) misc(rec recorder, set func(string, any)) {
	if _, ok := n.in["jsonLogging"]; ok {
		format := "text"
		if n.mustBool("jsonLogging", false) {
			format = "json"
		}
		set("logFormat", format)
		rec.mapped("jsonLogging", "values: logFormat")
	}
	if n.has("logLevel") {
		rec.notMapped("logLevel", "sluice's chart has no log level value; the controller and agent take --log-level")
	}
	if n.mustBool("dryRun", false) {
		set("controller.dryRun", true)
		rec.differs("dryRun", "values: controller.dryRun", "sluice's dry run covers its NodePool decisions (status and WouldAct Events, no node or machine changed) and turns the agent's own cordon off")
	} else {
		n.offToo(rec, "dryRun", "controller.dryRun is false by default")
	}
	if n.has("enablePrometheusServer") || n.has("prometheusServerPort") {
		rec.notMapped("enablePrometheusServer, prometheusServerPort", "sluice always serves metrics: controller.metricsPort and agent.metricsPort")
	}
	n.monitor(rec, set, "podMonitor", "monitoring.podMonitor.enabled", "scrapes sluice's agents; the controller's metrics need monitoring.serviceMonitor.enabled")
	n.monitor(rec, set, "serviceMonitor", "monitoring.serviceMonitor.enabled", "scrapes sluice's controller")
	if n.has("emitKubernetesEvents") {
		rec.mappedBecause("emitKubernetesEvents", "(always)", "sluice always records Events on the node and its pool")
	}
	if n.has("kubernetesEventsExtraAnnotations") {
		rec.notMapped("kubernetesEventsExtraAnnotations", "sluice's Events carry no extra annotations")
	}
	for _, k := range nthPlumbing {
		if _, ok := n.in[k]; ok {
			n.used[k] = true
			rec.notMapped(k, "a setting of NTH's own pods or image; the sluice chart has its own")
		}
	}
}

// monitor maps NTH's podMonitor or serviceMonitor block.
func (n *nthValues) monitor(rec recorder, set func(string, any), key, target, why string) {
	m, ok := n.in[key].(map[string]any)
	n.used[key] = true
	if !ok {
		if n.in[key] != nil {
			rec.notMapped(key, "not a map as NTH's chart has it")
		}
		return
	}
	if m["create"] == true {
		set(target, true)
		rec.differs(key+".create", "values: "+target, why)
	} else {
		rec.mappedBecause(key+" (not created)", "(default)", target+" is false by default")
	}
	var rest []string
	for _, k := range sortedKeys(m) {
		if k != "create" {
			rest = append(rest, key+"."+k)
		}
	}
	if len(rest) > 0 {
		rec.notMapped(strings.Join(rest, ", "), "sluice's monitoring.interval and monitoring.labels apply to all its monitors")
	}
}

// argTokens splits a flags or env text into tokens, dropping comments and
// YAML list dashes, honouring simple quotes.
func argTokens(text string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "- "))
		line = strings.TrimSpace(strings.TrimSuffix(line, "\\"))
		line = unquote(line)
		// --name=value or NAME=value: the rest of the line is the value,
		// spaces and all (a container's args and env hold one a line).
		if first := strings.Fields(line); len(first) > 0 && strings.Contains(first[0], "=") {
			k, v, _ := strings.Cut(line, "=")
			out = append(out, k+"="+unquote(v))
			continue
		}
		out = append(out, fieldsQuoted(line)...)
	}
	return out, sc.Err()
}

// fieldsQuoted splits on spaces outside single or double quotes, and drops
// the quotes.
func fieldsQuoted(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote, in = r, true
		case quote == 0 && r == ' ':
			if in || cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
			in = false
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in || cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// kebabToCamel turns "enable-rebalance-draining" into
// "enableRebalanceDraining".
func kebabToCamel(s string) string {
	parts := strings.Split(s, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// unquote drops one pair of matching quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
