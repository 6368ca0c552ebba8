package cli

import (
	"strings"
	"testing"
)

// Bad controller flags are refused before anything starts, each with what
// to fix.
func TestControllerFlagsRefuseBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--aws-queue-url", "sluice-events"}, `--aws-queue-url "sluice-events": want an SQS queue URL`},
		{[]string{"--aws-queue-url", "https://sqs.us-east-1.amazonaws.com/12345/q"}, "want an SQS queue URL"},
		{[]string{"--providers", "gce"}, `--providers "gce": sluice knows [kwok aws-asg azure-vmss aks-agentpool gcp-mig cluster-api]`},
		{[]string{"--workers", "0"}, "--workers 0: must be at least 1"},
		{[]string{"--profiling", "--metrics-bind-address", "0"}, "--profiling serves on --metrics-bind-address, which is 0 (off)"},
		{[]string{"--timeline-retention", "-1h"}, "--timeline-retention -1h0m0s: must not be negative"},
		{[]string{"--leader-elect=false", "--leader-election-namespace", ""}, "--leader-election-namespace is empty: the controller keeps its Lease and its drains' timelines there"},
	} {
		cmd := newControllerCommand()
		cmd.SetArgs(append(tt.args, "--identity", "test"))
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestSQSURL(t *testing.T) {
	for url, region := range map[string]string{
		"https://sqs.eu-west-1.amazonaws.com/123456789012/sluice-events":   "eu-west-1",
		"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/sluice.fifo": "cn-north-1",
		"http://sqs.eu-west-1.amazonaws.com/123456789012/q":                "",
		"https://sqs.eu-west-1.amazonaws.com/123456789012/q/extra":         "",
	} {
		m := sqsURL.FindStringSubmatch(url)
		if got := ""; m != nil && m[1] != region || m == nil && region != "" {
			if m != nil {
				got = m[1]
			}
			t.Errorf("%s: region %q, want %q", url, got, region)
		}
	}
}
