package chart

import (
	"os/exec"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// The agent reads the reboot sentinel through a read-only hostPath of its
// directory, at the path its flag names; a command or the check off mounts
// nothing from the host.
func TestAgentRebootSentinelValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       []string
		wantArgs  []string
		wantMount map[string]any // the volumeMount; nil: no volume at all
		wantHost  string         // the hostPath
	}{
		{
			name:      "default",
			wantArgs:  []string{"--reboot-check-period=1m", "--reboot-sentinel=/host/var/run/reboot-required"},
			wantMount: map[string]any{"name": "reboot-sentinel", "mountPath": "/host/var/run", "readOnly": true},
			wantHost:  "/var/run",
		},
		{
			name:      "another file",
			set:       []string{"agent.reboot.sentinel=/run/sluice/reboot", "agent.reboot.checkPeriod=5m"},
			wantArgs:  []string{"--reboot-check-period=5m", "--reboot-sentinel=/host/run/sluice/reboot"},
			wantMount: map[string]any{"name": "reboot-sentinel", "mountPath": "/host/run/sluice", "readOnly": true},
			wantHost:  "/run/sluice",
		},
		{
			name:     "a command",
			set:      []string{"agent.reboot.sentinelCommand=/opt/needs-reboot --quiet"},
			wantArgs: []string{"--reboot-check-period=1m", "--reboot-sentinel-command=/opt/needs-reboot --quiet"},
		},
		{
			name:     "off",
			set:      []string{"agent.reboot.sentinel="},
			wantArgs: []string{"--reboot-check-period=1m", "--reboot-sentinel="},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "sluice", ".", "-n", "sluice-system"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			ds := objects(t, helm(t, args...))["DaemonSet/sluice-agent"]
			container := at(ds, "spec", "template", "spec", "containers").([]any)[0]
			var reboot []string
			for _, a := range at(container, "args").([]any) {
				if strings.HasPrefix(a.(string), "--reboot-") {
					reboot = append(reboot, a.(string))
				}
			}
			if !slices.Equal(reboot, tc.wantArgs) {
				t.Errorf("agent args %q; want %q", reboot, tc.wantArgs)
			}
			mounts, _ := at(container, "volumeMounts").([]any)
			volumes, _ := at(ds, "spec", "template", "spec", "volumes").([]any)
			if tc.wantMount == nil {
				if len(mounts) > 0 || len(volumes) > 0 {
					t.Errorf("mounts %v, volumes %v; want none", mounts, volumes)
				}
				return
			}
			if len(mounts) != 1 || !reflect.DeepEqual(mounts[0], tc.wantMount) {
				t.Fatalf("volumeMounts %v; want [%v]", mounts, tc.wantMount)
			}
			want := []any{map[string]any{"name": "reboot-sentinel", "hostPath": map[string]any{"path": tc.wantHost, "type": "Directory"}}}
			if !reflect.DeepEqual(volumes, want) {
				t.Errorf("volumes %v; want %v", volumes, want)
			}
			// The flag names a file in the mounted directory.
			flag := strings.TrimPrefix(tc.wantArgs[1], "--reboot-sentinel=")
			if path.Dir(flag) != tc.wantMount["mountPath"] {
				t.Errorf("--reboot-sentinel %s is not in the mount %s", flag, tc.wantMount["mountPath"])
			}
		})
	}
}

// Reboot values the agent would refuse are refused before anything is
// rendered, naming the value; a sentinel in / would mount the host's root.
func TestAgentRebootValuesRefused(t *testing.T) {
	bin := testenv.Tool(t, HelmEnv, "run `make test`, or `"+HelmEnv+"=$(hack/tools/helm.sh) go test ./charts/...`")
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"agent.reboot.sentinel=reboot-required"}, "/agent/reboot/sentinel"},
		{[]string{"agent.reboot.sentinel=/reboot-required"}, "/agent/reboot/sentinel"},
		{[]string{"agent.reboot.sentinel=/var/run/"}, "/agent/reboot/sentinel"},
		{[]string{"agent.reboot.sentinel=/var/../etc/reboot-required"}, "/agent/reboot/sentinel"},
		{[]string{"agent.reboot.checkPeriod=1 hour"}, "/agent/reboot/checkPeriod"},
		{[]string{"agent.reboot.sentinelCommand=/opt/needs-reboot", "agent.reboot.sentinel=/run/reboot-required"},
			`agent.reboot.sentinelCommand "/opt/needs-reboot" and agent.reboot.sentinel "/run/reboot-required": set one`},
	} {
		args := []string{"template", "sluice", "."}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil {
			t.Errorf("--set %v: rendered; want it refused", c.set)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("--set %v: %s; want an error naming %s", c.set, out, c.want)
		}
	}
}
