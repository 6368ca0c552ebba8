package timeline

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestConfigMapNameIsAValidNameForEveryNode(t *testing.T) {
	long := strings.Repeat("a", 240) + "." + strings.Repeat("b", 30)
	for _, node := range []string{"aks-spot-12345678-vmss000007", "ip-10-0-1-7.ec2.internal", long, long + "c"} {
		name := ConfigMapName(node)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("ConfigMapName(%q) = %q: %v", node, name, errs)
		}
		if len(node) < 200 && name != "sluice-timeline-"+node {
			t.Errorf("ConfigMapName(%q) = %q; want the prefix and the node", node, name)
		}
	}
	if ConfigMapName(long) == ConfigMapName(long+"c") {
		t.Errorf("two long node names share the ConfigMap %s", ConfigMapName(long))
	}
	if !regexp.MustCompile(`-[0-9a-f]{16}$`).MatchString(ConfigMapName(long)) {
		t.Errorf("a cut name ends without the node's hash: %s", ConfigMapName(long))
	}
}

// A timeline too large for a ConfigMap loses its messages first; one too
// large even without them is refused, not cut.
func TestEncodeBoundedDropsMessagesThenRefuses(t *testing.T) {
	bars := func(n, msg int) Timeline {
		l := Lane{Node: "a", Message: strings.Repeat("m", msg)}
		for range n {
			l.Pods = append(l.Pods, Bar{Pod: "ns/web", Message: strings.Repeat("m", msg)})
		}
		return Timeline{Lanes: []Lane{l}}
	}
	small := bars(3, 10)
	data, err := encodeBounded(small)
	if err != nil || !strings.Contains(string(data), strings.Repeat("m", 10)) {
		t.Fatalf("a small timeline: %v, %s", err, data)
	}
	big := bars(200, 10_000) // 2 MB of messages
	data, err = encodeBounded(big)
	if err != nil || len(data) > maxBytes {
		t.Fatalf("a timeline large by its messages: %v, %d bytes", err, len(data))
	}
	var back Timeline
	if err := json.Unmarshal(data, &back); err != nil || len(back.Lanes[0].Pods) != 200 || back.Lanes[0].Pods[0].Message != "" {
		t.Errorf("read back: %v; want 200 bars without messages", err)
	}
	if big.Lanes[0].Pods[0].Message == "" {
		t.Error("encodeBounded changed the caller's timeline")
	}
	if _, err := encodeBounded(bars(40_000, 0)); err == nil || !strings.Contains(err.Error(), "a ConfigMap holds 1 MiB") {
		t.Errorf("a timeline of 40,000 bars: %v; want a refusal", err)
	}
}
