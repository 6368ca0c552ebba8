package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func nthFile(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "nth", name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".txt") {
		v, err := ParseNTHArgs(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// get reads a chart value at a dotted path.
func get(values map[string]any, path string) any {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

func TestNTH(t *testing.T) {
	cases := []struct {
		file   string
		values map[string]any // path → value
		report map[string]Status
	}{{
		file: "queue-values.yaml",
		values: map[string]any{
			"controller.awsQueueURL":       "https://sqs.us-east-1.amazonaws.com/123456789012/nth-queue",
			"agent.enabled":                false,
			"controller.webhook.url":       "https://hooks.slack.com/services/T000/B000/XXXX",
			"logFormat":                    "json",
			"controller.priorityClassName": "system-cluster-critical",
		},
		report: map[string]Status{
			"enableSqsTerminationDraining, queueURL": Mapped,
			"webhookTemplate":                        NotMapped,
			"checkTagBeforeDraining":                 NotMapped,
			"heartbeatInterval, heartbeatUntil":      Differs,
			"enableScheduledEventDraining":           Differs,
			"serviceAccount.annotations":             Differs,
			"replicas":                               NotMapped,
			"image":                                  NotMapped,
		},
	}, {
		file: "imds-values.yaml",
		values: map[string]any{
			"agent.enabled":      true,
			"agent.imdsEndpoint": "http://169.254.169.254:80",
		},
		report: map[string]Status{
			"enableRebalanceDraining":              NotMapped,
			"cordonOnly":                           NotMapped,
			"taintNode":                            Differs,
			"taintEffect":                          NotMapped,
			"enableScheduledEventDraining (false)": NotMapped,
			"daemonsetNodeSelector":                Mapped,
			"enableQueueMagic":                     NotMapped,
			"useHostNetwork":                       NotMapped,
		},
	}, {
		file: "args.txt",
		values: map[string]any{
			"controller.awsQueueURL": "https://sqs.eu-west-1.amazonaws.com/123456789012/nth",
			"controller.webhook.url": "https://example.com/hook",
			"logFormat":              "text",
		},
		report: map[string]Status{
			"awsRegion":                              Mapped,
			"enableRebalanceMonitoring":              Mapped,
			"deleteLocalData (unset: NTH's default)": Differs,
		},
	}}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			res, err := NTH(nthFile(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range c.values {
				if want == nil {
					continue
				}
				if got := get(res.Values, path); got != want {
					t.Errorf("values %s = %v, want %v", path, got, want)
				}
			}
			for field, want := range c.report {
				wantStatus(t, res, field, want)
			}
			checkValues(t, c.file, res.Values)
			if t.Failed() {
				t.Log(reportText(res))
			}
		})
	}
}

func TestNTHValuesDetail(t *testing.T) {
	res, err := NTH(nthFile(t, "queue-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ann, _ := get(res.Values, "controller.serviceAccountAnnotations").(map[string]any)
	if ann["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/nth" {
		t.Errorf("serviceAccountAnnotations %v", ann)
	}
	env, _ := get(res.Values, "controller.env").([]any)
	if len(env) != 1 || env[0].(map[string]any)["name"] != "AWS_REGION" {
		t.Errorf("controller.env %v", env)
	}
}

// TestNTHEveryKeyReported: every key of every input is in the report, none
// dropped in silence.
func TestNTHEveryKeyReported(t *testing.T) {
	for _, f := range []string{"queue-values.yaml", "imds-values.yaml", "args.txt"} {
		in := nthFile(t, f)
		res, err := NTH(in)
		if err != nil {
			t.Fatal(err)
		}
		for k := range in {
			found := false
			for _, e := range res.Report {
				if strings.Contains(e.Field, k) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: input key %s is not in the report", f, k)
			}
		}
	}
}

func TestNTHArgs(t *testing.T) {
	v, err := ParseNTHArgs(`
# a comment
- --enable-asg-lifecycle-draining=false
- --webhook-template '{"text": "a b"}'
WEBHOOK_URL=https://example.com/x
INSTANCE_METADATA_URL="http://127.0.0.1:1338"
--dry-run
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"enableASGLifecycleDraining": "false",
		"webhookTemplate":            `{"text": "a b"}`,
		"webhookURL":                 "https://example.com/x",
		"instanceMetadataURL":        "http://127.0.0.1:1338",
		"dryRun":                     "true",
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %q, want %q", k, v[k], w)
		}
	}
}

func TestNTHBadInput(t *testing.T) {
	cases := []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"enableSqsTerminationDraining": true}, "queueURL is empty"},
		{map[string]any{"cordonOnly": "sometimes"}, `cordonOnly "sometimes": must be true or false`},
		{map[string]any{"enableSqsTerminationDraining": 3}, "must be true or false"},
	}
	for _, c := range cases {
		if _, err := NTH(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NTH(%v): %v, want an error holding %q", c.in, err, c.want)
		}
	}
	if _, err := ParseNTHArgs("queue-url https://x"); err == nil {
		t.Error("a word that is neither a flag nor a variable was read")
	}
	if _, err := ParseNTHArgs("Queue_Url=x"); err == nil {
		t.Error("a mixed-case variable was read")
	}
}

// nthChartKeys are the top-level keys of NTH's chart values.yaml (chart
// 0.27.6, app v1.25.6), as documented there.
var nthChartKeys = []string{
	"image", "nameOverride", "fullnameOverride", "serviceAccount", "rbac", "customLabels", "podLabels", "podAnnotations",
	"podSecurityContext", "securityContext", "terminationGracePeriodSeconds", "resources", "nodeSelector", "affinity", "tolerations",
	"topologySpreadConstraints", "extraEnv", "probes", "logLevel", "logFormatVersion", "jsonLogging", "enablePrometheusServer",
	"prometheusServerPort", "dryRun", "cordonOnly", "taintNode", "enableOutOfServiceTaint", "excludeFromLoadBalancers",
	"deleteLocalData", "ignoreDaemonSets", "podTerminationGracePeriod", "nodeTerminationGracePeriod", "emitKubernetesEvents",
	"completeLifecycleActionDelaySeconds", "kubernetesEventsExtraAnnotations", "webhookURL", "webhookURLSecretName",
	"webhookHeaders", "webhookProxy", "webhookTemplate", "webhookTemplateConfigMapName", "webhookTemplateConfigMapKey",
	"enableSqsTerminationDraining", "replicas", "strategy", "podDisruptionBudget", "serviceMonitor", "priorityClassName",
	"awsRegion", "queueURL", "workers", "checkASGTagBeforeDraining", "checkTagBeforeDraining", "managedAsgTag", "managedTag",
	"useProviderId", "targetNodeOs", "linuxPodLabels", "windowsPodLabels", "linuxPodAnnotations", "windowsPodAnnotations",
	"updateStrategy", "daemonsetPriorityClassName", "podMonitor", "useHostNetwork", "dnsPolicy", "dnsConfig", "linuxDnsPolicy",
	"windowsDnsPolicy", "daemonsetNodeSelector", "linuxNodeSelector", "windowsNodeSelector", "daemonsetAffinity", "linuxAffinity",
	"windowsAffinity", "daemonsetTolerations", "linuxTolerations", "windowsTolerations", "enableProbesServer", "metadataTries",
	"enableSpotInterruptionDraining", "enableASGLifecycleDraining", "enableScheduledEventDraining", "enableRebalanceMonitoring",
	"enableRebalanceDraining", "deleteSqsMsgIfNodeNotFound", "heartbeatInterval", "heartbeatUntil", "sqsMsgVisibilityTimeoutSec",
	"awsEndpoint", "awsAccessKeyID", "awsSecretAccessKey", "instanceMetadataURL", "procUptimeFile",
}

// TestNTHEveryChartKey: every key of NTH's chart, in both modes and set to
// either boolean, is in the report.
func TestNTHEveryChartKey(t *testing.T) {
	for _, queue := range []bool{true, false} {
		for _, b := range []bool{true, false} {
			in := map[string]any{}
			for _, k := range nthChartKeys {
				switch {
				case strings.HasPrefix(k, "enable") || strings.HasPrefix(k, "check") || strings.HasPrefix(k, "use") ||
					k == "cordonOnly" || k == "taintNode" || k == "dryRun" || k == "jsonLogging" || k == "deleteLocalData" ||
					k == "ignoreDaemonSets" || k == "excludeFromLoadBalancers" || k == "deleteSqsMsgIfNodeNotFound":
					in[k] = b
				case strings.Contains(k, "Selector") || strings.Contains(k, "Labels") || strings.Contains(k, "Annotations") ||
					k == "serviceAccount" || k == "podMonitor" || k == "serviceMonitor" || k == "image" || k == "resources":
					in[k] = map[string]any{"a": "b"}
				case strings.Contains(k, "olerations"):
					in[k] = []any{map[string]any{"operator": "Exists"}}
				default:
					in[k] = "7"
				}
			}
			in["enableSqsTerminationDraining"] = queue
			in["queueURL"] = "https://sqs.us-east-1.amazonaws.com/1/q"
			res, err := NTH(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range nthChartKeys {
				found := false
				for _, e := range res.Report {
					found = found || strings.Contains(e.Field, k)
				}
				if !found {
					t.Errorf("queue mode %v, booleans %v: %s is not in the report", queue, b, k)
				}
			}
			checkValues(t, "every key", res.Values)
		}
	}
}
