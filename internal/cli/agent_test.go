package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/agent"
)

// The reboot flags: what each combination asks the agent to read, and the
// combinations refused, each naming its flag. (TestBadInput runs the refusals
// as a user would, as a process.)
func TestAgentRebootFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    agent.Sentinel // nil: the check is off
		refused string
	}{
		{name: "default", want: agent.FileSentinel{Path: agent.DefaultRebootSentinel}},
		{name: "another file", args: []string{"--reboot-sentinel", "/run/sluice/reboot"}, want: agent.FileSentinel{Path: "/run/sluice/reboot"}},
		{name: "off", args: []string{"--reboot-sentinel="}},
		{name: "a command", args: []string{"--reboot-sentinel-command", " /usr/bin/needs-reboot  --quiet "},
			want: agent.CommandSentinel{Args: []string{"/usr/bin/needs-reboot", "--quiet"}}},
		{name: "a command beside the default file, named", args: []string{"--reboot-sentinel-command", "needs-reboot", "--reboot-sentinel", agent.DefaultRebootSentinel},
			want: agent.CommandSentinel{Args: []string{"needs-reboot"}}},
		{name: "a command beside another file", args: []string{"--reboot-sentinel-command", "needs-reboot", "--reboot-sentinel", "/run/reboot"},
			refused: `--reboot-sentinel-command "needs-reboot" and --reboot-sentinel "/run/reboot": give one`},
		{name: "a command beside the check off", args: []string{"--reboot-sentinel-command", "needs-reboot", "--reboot-sentinel="},
			refused: `--reboot-sentinel-command "needs-reboot" and --reboot-sentinel "": give one`},
		{name: "a blank command", args: []string{"--reboot-sentinel-command", "  "}, refused: `--reboot-sentinel-command "  ": give a command`},
		{name: "a relative file", args: []string{"--reboot-sentinel", "var/run/reboot-required"}, refused: `--reboot-sentinel "var/run/reboot-required": give an absolute path`},
		{name: "the shortest period", args: []string{"--reboot-check-period", "5s"}, want: agent.FileSentinel{Path: agent.DefaultRebootSentinel}},
		{name: "a period too short", args: []string{"--reboot-check-period", "4s"}, refused: "--reboot-check-period 4s: use 5s or more"},
		{name: "no period", args: []string{"--reboot-check-period", "0s"}, refused: "--reboot-check-period 0s: use 5s or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &agentFlags{}
			if err := f.command().ParseFlags(append([]string{"--node", "n1"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			err := f.validate()
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("error %v; want one saying %q", err, tc.refused)
			case tc.refused != "":
				return
			}
			if got := f.reboot.check(); !reflect.DeepEqual(got.Sentinel, tc.want) {
				t.Errorf("sentinel %#v; want %#v", got.Sentinel, tc.want)
			}
		})
	}
}
