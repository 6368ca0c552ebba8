package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// inside is what the controller's own metrics and profiles say about an
// event: where a cordon's time went (waiting in the work queue, or in the
// reconcile and its write) and what the memory holds, so that a figure
// that misses its target says why.
type inside struct {
	queueWait, reconcile histogram // the maintenance controller's, during the event
	conflicts            float64   // 409 answers to the controller's writes
	cpuSeconds           float64
	rss                  []string // sampled through the event
	heapTop              string   // go tool pprof -top of the heap in use at the end
	heapFile             string
}

// histogram is one Prometheus histogram series: cumulative counts by upper
// bound, as the text format gives them.
type histogram struct {
	bounds []float64
	counts []float64
}

// scrapeHistogram reads the series of family whose label has value.
func scrapeHistogram(url, family, label, value string) (histogram, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return histogram{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	var h histogram
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), "{")
		if name != family+"_bucket" {
			continue
		}
		labels, v, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		le, match := "", false
		for _, m := range promLabel.FindAllStringSubmatch(labels, -1) {
			match = match || m[1] == label && m[2] == value
			if m[1] == "le" {
				le = m[2]
			}
		}
		if !match {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound, err = math.Inf(1), nil
		}
		count, err2 := strconv.ParseFloat(strings.Fields(v)[0], 64)
		if err != nil || err2 != nil {
			return histogram{}, fmt.Errorf("scraping %s: bad bucket %q", url, sc.Text())
		}
		h.bounds = append(h.bounds, bound)
		h.counts = append(h.counts, count)
	}
	return h, sc.Err()
}

func (h histogram) minus(o histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range d.counts {
		if i < len(o.counts) {
			d.counts[i] -= o.counts[i]
		}
	}
	return d
}

// quantile is the upper bound of the bucket holding the q-th sample: the
// histogram says no more than that.
func (h histogram) quantile(q float64) string {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return "none"
	}
	rank := q * h.counts[len(h.counts)-1]
	for i, c := range h.counts {
		if c >= rank {
			if math.IsInf(h.bounds[i], 1) {
				return fmt.Sprintf("> %gs", h.bounds[i-1])
			}
			return fmt.Sprintf("<= %gs", h.bounds[i])
		}
	}
	return "none"
}

func (h histogram) String() string {
	if len(h.counts) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %s, p99 %s (%.0f)", h.quantile(0.5), h.quantile(0.99), h.counts[len(h.counts)-1])
}

// insideBefore reads the counters an event's figures are measured from.
func (c *controllerProcess) insideBefore(b *testing.B) inside {
	b.Helper()
	var in inside
	var err error
	if in.queueWait, err = scrapeHistogram(c.metrics, "workqueue_queue_duration_seconds", "name", "maintenance"); err != nil {
		b.Fatal(err)
	}
	if in.reconcile, err = scrapeHistogram(c.metrics, "controller_runtime_reconcile_time_seconds", "controller", "maintenance"); err != nil {
		b.Fatal(err)
	}
	codes, err := scrape(c.metrics, "rest_client_requests_total", "code")
	if err != nil {
		b.Fatal(err)
	}
	in.conflicts, in.cpuSeconds = codes["409"], c.cpu(b)
	return in
}

// insideAfter is what changed since before, and a heap profile of the
// controller as the event ends (it runs with --profiling).
func (c *controllerProcess) insideAfter(b *testing.B, before inside, rss []string) inside {
	b.Helper()
	after := c.insideBefore(b)
	in := inside{queueWait: after.queueWait.minus(before.queueWait), reconcile: after.reconcile.minus(before.reconcile),
		conflicts: after.conflicts - before.conflicts, cpuSeconds: after.cpuSeconds - before.cpuSeconds, rss: rss}
	in.heapFile, in.heapTop = c.heapProfile(b)
	return in
}

// heapProfile saves the controller's heap profile and returns its file and
// its largest holders by space in use.
func (c *controllerProcess) heapProfile(b *testing.B) (file, top string) {
	b.Helper()
	url := strings.TrimSuffix(c.metrics, "/metrics") + "/debug/pprof/heap"
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return "", "no heap profile: " + err.Error()
	}
	defer resp.Body.Close()
	f, err := os.CreateTemp("", "sluice-bench-heap-*.pb.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return f.Name(), "no heap profile: " + err.Error()
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=12", "-sample_index=inuse_space", f.Name()).CombinedOutput()
	if err != nil {
		return f.Name(), fmt.Sprintf("go tool pprof: %v\n%s", err, out)
	}
	return f.Name(), string(out)
}

func (in inside) rows(window time.Duration) [][]string {
	return [][]string{
		{"inside the controller, during the event", "", "", ""},
		{"  maintenance queue: wait before a worker took the node", in.queueWait.String(), "", ""},
		{"  maintenance reconcile, its writes included", in.reconcile.String(), "", ""},
		{"  write conflicts (409) answered to the controller", fmt.Sprintf("%.0f", in.conflicts), "", ""},
		{"  controller CPU", fmt.Sprintf("%.1fs in %.0fs (%.0f%% of a core)", in.cpuSeconds, window.Seconds(), 100*in.cpuSeconds/window.Seconds()), "", ""},
		{"  controller RSS through the event", strings.Join(in.rss, ", "), "", ""},
		{"  heap profile at the end", in.heapFile, "", ""},
	}
}
