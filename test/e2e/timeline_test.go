package e2e

import (
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// TestDrainTimelineRendersInABrowser drains two nodes whose pods share a
// tight budget, with --timeline, and opens the page in headless Chromium:
// the browser must draw a lane per node and a row per pod, the waits the
// budget caused, and the deadline. SLUICE_UPDATE_DOCS=1 keeps the
// screenshot as docs/images/timeline.png.
func TestDrainTimelineRendersInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	t.Parallel()
	browser := chromium(t)
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	pool := fixture.AKSPool(sandboxtest.UniqueName("tl"), 3)
	nodes := env.CreateNodes(t, pool)
	ns := env.Namespace
	// Every pod starts on the first two nodes; the third takes the
	// replacements, each Ready 3 s after it starts, so the budget makes the
	// drain wait for them.
	setUnschedulable(t, env, nodes[2].Name, true)
	env.Create(t,
		fixture.Deployment(ns, "web", 6, fixture.NodeSelector(pool.Selector()), fixture.StartsAfter(3), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("5")),
	)
	env.WaitForPods(t, "app=web", 6)
	waitForBudget(t, env, "web")
	setUnschedulable(t, env, nodes[2].Name, false)

	page := filepath.Join(t.TempDir(), "drain.html")
	out, errOut, code := run(t, sluice, "drain", nodes[0].Name, nodes[1].Name, "--kubeconfig", kubeconfig,
		"--ignore-daemonsets", "--parallel", "2", "--deadline", "60s", "--timeline", page, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d; want 0\n%s%s", code, out, errOut)
	}
	var report drain.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("reading the report: %v\n%s", err, out)
	}
	pods := 0
	for _, n := range report.Nodes {
		pods += len(n.Pods)
	}

	// The DOM as the browser built it, after the page's script ran.
	dom := runChromium(t, browser, "--dump-dom", "file://"+page)
	if m := regexp.MustCompile(`data-rendered="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] != "2" {
		t.Fatalf("the page did not finish drawing 2 lanes (data-rendered %v)", m)
	}
	if lanes := strings.Count(dom, `class="lane node"`); lanes != 2 {
		t.Errorf("%d lanes drawn, want 2 (one per node)", lanes)
	}
	for _, n := range nodes[:2] {
		if !strings.Contains(dom, `data-node="`+n.Name+`"`) {
			t.Errorf("no lane for %s", n.Name)
		}
	}
	if rows := strings.Count(dom, `class="pod"`); rows != pods {
		t.Errorf("%d pod rows drawn, the report has %d pods", rows, pods)
	}
	if strings.Count(dom, `class="bar leaving"`) < 6 {
		t.Errorf("fewer than 6 pods drawn leaving:\n%s", dom)
	}
	if !strings.Contains(dom, `class="bar blocked"`) {
		t.Errorf("the budget's waits are not drawn")
	}
	if !strings.Contains(dom, `class="deadline"`) {
		t.Errorf("the deadline is not drawn")
	}

	// And the picture itself: the bars' colours are on the screen.
	shot := filepath.Join(t.TempDir(), "timeline.png")
	runChromium(t, browser, "--screenshot="+shot, "--window-size=1200,"+strconv.Itoa(200+24*(pods+2)), "--hide-scrollbars", "file://"+page)
	img := readPNG(t, shot)
	for name, colour := range map[string][3]uint8{"leaving": {0x09, 0x69, 0xda}, "blocked": {0xd4, 0xa7, 0x2c}, "deadline": {0xcf, 0x22, 0x2e}} {
		if n := countColour(img, colour); n < 20 {
			t.Errorf("the screenshot has %d pixels of the %s colour", n, name)
		}
	}
	if os.Getenv("SLUICE_UPDATE_DOCS") == "1" {
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/images/timeline.png", data, 0o644); err != nil { //nolint:gosec // a doc image
			t.Fatal(err)
		}
	}
}

// chromium finds headless Chromium: $SLUICE_CHROMIUM, or Debian's package
// (make tools installs it).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is needed to render the timeline: apt-get install chromium (make tools does it), or set SLUICE_CHROMIUM")
	return ""
}

// runChromium runs the browser headless on a page, with a profile of its
// own, and returns what it printed.
func runChromium(t *testing.T, browser string, args ...string) string {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.Command(browser, append(base, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", browser, args, err, stderr.String())
	}
	return stdout.String()
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// countColour counts the pixels within a small distance of colour.
func countColour(img image.Image, colour [3]uint8) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, colour[0]) && near(g>>8, colour[1]) && near(bl>>8, colour[2]) {
				n++
			}
		}
	}
	return n
}

func near(v uint32, want uint8) bool {
	d := int(v) - int(want)
	return d > -8 && d < 8
}
