package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// BenchmarkSandboxScale builds the largest cluster later benchmarks rely on —
// 1,000 kwok nodes in ten pools and 30,000 pods from 300 Deployments placed by
// the real scheduler — and reports how long each step took and how much memory
// each control-plane component holds. It has no target: its scorecard only
// prints the machine's load.
func BenchmarkSandboxScale(b *testing.B) {
	const (
		pools       = 10
		nodesPer    = 100
		deployments = 300
		replicas    = 100
	)
	sc := newScorecard(b)
	for range b.N {
		ctx := context.Background()
		sb, client, _ := startSandbox(b)
		counter := newReadyCounter(ctx, client)
		start := time.Now()
		var nodes []runtime.Object
		for i := range pools {
			var p fixture.Pool
			switch i % 3 {
			case 0:
				p = fixture.AKSPool(fmt.Sprintf("pool%d", i), nodesPer)
			case 1:
				p = fixture.EKSNodeGroup(fmt.Sprintf("ng%d", i), nodesPer, fixture.MaxPods(110))
			default:
				p = fixture.KarpenterPool(fmt.Sprintf("kp%d", i), nodesPer, fixture.MaxPods(110))
			}
			for _, n := range p.Nodes() {
				nodes = append(nodes, n)
			}
		}
		createParallel(ctx, b, client, nodes, 16)
		waitFor(b, sb, 10*time.Minute, "nodes Ready", func() (int64, int64) { return counter.readyNodes.Load(), int64(len(nodes)) })
		nodesReady := time.Since(start)

		podStart := time.Now()
		var workloads []runtime.Object
		for i := range deployments {
			workloads = append(workloads, fixture.Deployment("default", fmt.Sprintf("app%03d", i), replicas, fixture.Requests("10m", "16Mi")))
		}
		createParallel(ctx, b, client, workloads, 8)
		want := int64(deployments * replicas)
		waitFor(b, sb, 30*time.Minute, "pods Running and Ready", func() (int64, int64) { return counter.readyPods.Load(), want })
		podsReady := time.Since(podStart)

		report(b, sb, nodesReady, podsReady, len(nodes), int(want))
	}
	sc.judge()
}

// readyCounter watches nodes and pods and counts the Ready ones.
type readyCounter struct {
	readyNodes, readyPods atomic.Int64
}

func newReadyCounter(ctx context.Context, client kubernetes.Interface) *readyCounter {
	c := &readyCounter{}
	factory := informers.NewSharedInformerFactory(client, 0)
	track := func(inf cache.SharedIndexInformer, ready func(any) bool, n *atomic.Int64) {
		var mu sync.Mutex
		seen := map[string]bool{}
		update := func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			now := ready(obj)
			if now != seen[key] {
				seen[key] = now
				if now {
					n.Add(1)
				} else {
					n.Add(-1)
				}
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    update,
			UpdateFunc: func(_, obj any) { update(obj) },
			DeleteFunc: func(obj any) {
				key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[key] {
					n.Add(-1)
				}
				delete(seen, key)
			},
		})
	}
	track(factory.Core().V1().Nodes().Informer(), func(obj any) bool {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}, &c.readyNodes)
	track(factory.Core().V1().Pods().Informer(), func(obj any) bool {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}, &c.readyPods)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return c
}

func createParallel(ctx context.Context, b *testing.B, client kubernetes.Interface, objs []runtime.Object, workers int) {
	b.Helper()
	work := make(chan runtime.Object)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				if err := fixture.Create(ctx, client, obj); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, obj := range objs {
		work <- obj
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// waitFor polls progress until done reaches want, printing progress every 10 s.
func waitFor(b *testing.B, sb *sandbox.Sandbox, timeout time.Duration, what string, progress func() (done, want int64)) {
	b.Helper()
	start := time.Now()
	last := start
	for {
		done, want := progress()
		if done >= want {
			return
		}
		if err := sb.Err(); err != nil {
			b.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Since(start) > timeout {
			b.Fatalf("waiting for %s: %d of %d after %s", what, done, want, timeout)
		}
		if time.Since(last) >= 10*time.Second {
			fmt.Fprintf(os.Stderr, "  %s: %d/%d after %s\n", what, done, want, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func report(b *testing.B, sb *sandbox.Sandbox, nodesReady, podsReady time.Duration, nodes, pods int) {
	b.Helper()
	b.ReportMetric(sb.StartupDuration().Seconds(), "controlplane-s")
	b.ReportMetric(nodesReady.Seconds(), "nodes-ready-s")
	b.ReportMetric(podsReady.Seconds(), "pods-ready-s")
	b.ReportMetric(float64(pods)/podsReady.Seconds(), "pods/s")

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(os.Stdout, "\nsandbox at scale: %d kwok nodes, %d pods (300 Deployments), 2-core machine\n", nodes, pods)
	fmt.Fprintf(w, "step\tseconds\trate\t\n")
	fmt.Fprintf(w, "control plane ready\t%.1f\t\t\n", sb.StartupDuration().Seconds())
	fmt.Fprintf(w, "%d nodes created and Ready\t%.1f\t%.0f nodes/s\t\n", nodes, nodesReady.Seconds(), float64(nodes)/nodesReady.Seconds())
	fmt.Fprintf(w, "%d pods scheduled, Running, Ready\t%.1f\t%.0f pods/s\t\n", pods, podsReady.Seconds(), float64(pods)/podsReady.Seconds())
	fmt.Fprintf(w, "total cluster build\t%.1f\t\t\n", (sb.StartupDuration() + nodesReady + podsReady).Seconds())
	_ = w.Flush()

	fmt.Fprintf(os.Stdout, "\ncontrol-plane memory at %d nodes / %d pods\n", nodes, pods)
	fmt.Fprintf(w, "component\tRSS MiB\tpeak MiB\t\n")
	var total uint64
	for _, p := range sb.Processes() {
		m, err := sandbox.ResidentMemory(p.PID)
		if err != nil {
			continue
		}
		total += m.RSS
		fmt.Fprintf(w, "%s\t%d\t%d\t\n", p.Name, m.RSS>>20, m.Peak>>20)
		b.ReportMetric(float64(m.RSS>>20), p.Name+"-MiB")
	}
	fmt.Fprintf(w, "total\t%d\t\t\n", total>>20)
	_ = w.Flush()
	b.ReportMetric(float64(total>>20), "controlplane-MiB")
}
