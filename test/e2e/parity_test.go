package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// The pod classes kubectl drain distinguishes, each built pinned to a node.
var podClasses = map[string]func(ns, node string) []runtime.Object{
	"plain": func(ns, node string) []runtime.Object {
		return []runtime.Object{fixture.Deployment(ns, "plain", 1, hostname(node), fixture.ExitsAfter(0.5))}
	},
	"daemon": func(ns, node string) []runtime.Object {
		return []runtime.Object{fixture.DaemonSet(ns, "daemon", hostname(node))}
	},
	"mirror": func(ns, node string) []runtime.Object {
		p := fixture.Pod(ns, "mirror", fixture.OnNode(node))
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "mirror"}
		return []runtime.Object{p}
	},
	"emptydir": func(ns, node string) []runtime.Object {
		return []runtime.Object{fixture.Deployment(ns, "emptydir", 1, hostname(node), fixture.EmptyDir(), fixture.ExitsAfter(0.5))}
	},
	"naked": func(ns, node string) []runtime.Object {
		return []runtime.Object{fixture.Pod(ns, "naked", fixture.OnNode(node), fixture.ExitsAfter(0.5))}
	},
	"finished": func(ns, node string) []runtime.Object {
		return []runtime.Object{fixture.Pod(ns, "finished", fixture.OnNode(node), fixture.EmptyDir(), fixture.CompletesAfter(0.2))}
	},
}

func hostname(node string) fixture.PodOption {
	return fixture.NodeSelector(map[string]string{fixture.LabelHostname: node})
}

// scenario is one generated parity case: a set of pod classes and kubectl's flags.
type scenario struct {
	classes                                 []string
	ignoreDaemonSets, deleteEmptyDir, force bool
}

func (s scenario) flags() []string {
	var f []string
	if s.ignoreDaemonSets {
		f = append(f, "--ignore-daemonsets")
	}
	if s.deleteEmptyDir {
		f = append(f, "--delete-emptydir-data")
	}
	if s.force {
		f = append(f, "--force")
	}
	return f
}

func (s scenario) String() string {
	return fmt.Sprintf("%s_%s", strings.Join(s.classes, "+"), strings.Join(append([]string{"flags"}, s.flags()...), ""))
}

// scenarios covers every flag combination, each with a generated mix of
// classes (always including a plain pod, so there is something to evict).
func scenarios() []scenario {
	rng := rand.New(rand.NewPCG(7, 11)) //nolint:gosec // reproducible test data
	names := []string{"daemon", "mirror", "emptydir", "naked", "finished"}
	var out []scenario
	for mask := range 8 {
		for range 2 {
			s := scenario{classes: []string{"plain"}, ignoreDaemonSets: mask&1 != 0, deleteEmptyDir: mask&2 != 0, force: mask&4 != 0}
			for _, n := range names {
				if rng.IntN(2) == 0 {
					s.classes = append(s.classes, n)
				}
			}
			sort.Strings(s.classes)
			out = append(out, s)
		}
	}
	return out
}

// TestParityWithKubectlDrain runs kubectl drain (the pinned v1.34 build) and
// sluice drain over the same generated scenarios, each on its own node with its
// own copy of the pods, and requires the same verdict for every pod: evicted,
// skipped (left on the node and not in the way), refused (stops the drain), or
// untouched (the drain stopped before it). The one intended difference: when it
// refuses, sluice does not cordon the node (kubectl does).
func TestParityWithKubectlDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(tools, "kubectl")
	sluice := sandboxtest.Sluice(t)
	for _, sc := range scenarios() {
		t.Run(sc.String(), func(t *testing.T) {
			t.Parallel()
			env := sandboxtest.New(t)
			kubeconfig := writeKubeconfig(t, env)
			pool := fixture.KarpenterPool(sandboxtest.UniqueName("parity"), 2)
			nodes := env.CreateNodes(t, pool)
			kNode, sNode := nodes[0].Name, nodes[1].Name
			kNS, sNS := env.Namespace, env.Namespace+"-s"
			env.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sNS}})
			t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), sNS, metav1.DeleteOptions{}) })
			waitForServiceAccount(t, env, sNS)
			for _, class := range sc.classes {
				env.Create(t, podClasses[class](kNS, kNode)...)
				env.Create(t, podClasses[class](sNS, sNode)...)
			}
			kPods := waitForClasses(t, env, kNS, sc.classes)
			sPods := waitForClasses(t, env, sNS, sc.classes)

			args := append([]string{"--kubeconfig", kubeconfig, "drain", kNode, "--timeout", "60s"}, sc.flags()...)
			_, kErr, kCode := run(t, kubectl, args...)
			args = append([]string{"drain", sNode, "--kubeconfig", kubeconfig, "-o", "json"}, sc.flags()...)
			sOut, sErr, sCode := run(t, sluice, args...)

			kubectlSays := kubectlVerdicts(t, env, kNS, kPods, kErr)
			var report drain.Report
			if err := json.Unmarshal([]byte(sOut), &report); err != nil {
				t.Fatalf("sluice -o json (exit %d): %v\n%s\n%s", sCode, err, sOut, sErr)
			}
			sluiceSays := sluiceVerdicts(report, sPods)
			t.Logf("kubectl %v, sluice %v", kubectlSays, sluiceSays)
			for _, class := range sc.classes {
				if kubectlSays[class] != sluiceSays[class] {
					t.Errorf("%s: kubectl %s, sluice %s\nkubectl (exit %d): %s\nsluice (exit %d): %s", class,
						kubectlSays[class], sluiceSays[class], kCode, kErr, sCode, sOut)
				}
			}
			refused := false
			for _, v := range kubectlSays {
				refused = refused || v == "refused"
			}
			if wantCode := map[bool]int{true: 3, false: 0}[refused]; sCode != wantCode {
				t.Errorf("sluice exit %d, want %d (refused=%v)", sCode, wantCode, refused)
			}
			if kCode == 0 && refused {
				t.Errorf("kubectl exited 0 but refused pods")
			}
			sNodeObj, err := env.Client.CoreV1().Nodes().Get(context.Background(), sNode, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sNodeObj.Spec.Unschedulable == refused {
				t.Errorf("sluice left the node unschedulable=%v; want cordoned only when it drains (refused=%v)", sNodeObj.Spec.Unschedulable, refused)
			}
		})
	}
}

// waitForClasses waits until every class's pod is running (or, for finished,
// has succeeded) and returns the pod per class.
func waitForClasses(t *testing.T, env *sandboxtest.Env, ns string, classes []string) map[string]corev1.Pod {
	t.Helper()
	pods := map[string]corev1.Pod{}
	env.WaitFor(t, 60*time.Second, "the scenario's pods in "+ns, func(ctx context.Context) (bool, error) {
		list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		clear(pods)
		for _, p := range list.Items {
			app := p.Labels[fixture.LabelApp]
			want := corev1.PodRunning
			if app == "finished" {
				want = corev1.PodSucceeded
			}
			if p.Status.Phase == want && p.DeletionTimestamp == nil {
				pods[app] = p
			}
		}
		return len(pods) == len(classes), nil
	})
	return pods
}

var podRef = regexp.MustCompile(`[a-z0-9-]+/[a-z0-9.-]+`)

// kubectlVerdicts reads what kubectl did from the cluster and its error text.
func kubectlVerdicts(t *testing.T, env *sandboxtest.Env, ns string, pods map[string]corev1.Pod, stderr string) map[string]string {
	t.Helper()
	refused := map[string]bool{}
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "cannot delete") {
			continue
		}
		for _, ref := range podRef.FindAllString(line, -1) {
			refused[ref] = true
		}
	}
	out := map[string]string{}
	for class, p := range pods {
		now, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && (now.UID != p.UID || now.DeletionTimestamp != nil)):
			out[class] = "evicted"
		case err != nil:
			t.Fatal(err)
		case refused[ns+"/"+p.Name]:
			out[class] = "refused"
		case class == "mirror" || class == "daemon":
			out[class] = "skipped"
		default:
			out[class] = "untouched"
		}
	}
	return out
}

func sluiceVerdicts(report drain.Report, pods map[string]corev1.Pod) map[string]string {
	byName := map[string]string{}
	for class, p := range pods {
		byName[p.Name] = class
	}
	out := map[string]string{}
	for _, n := range report.Nodes {
		for _, p := range n.Pods {
			class := byName[p.Name]
			switch p.Outcome {
			case drain.PodEvicted, drain.PodDeleted:
				out[class] = "evicted"
			case drain.PodSkipped:
				out[class] = "skipped"
			case drain.PodBlocked:
				out[class] = "refused"
			case drain.PodNotEvicted:
				out[class] = "untouched"
			default:
				out[class] = string(p.Outcome)
			}
		}
	}
	return out
}

func waitForServiceAccount(t *testing.T, env *sandboxtest.Env, ns string) {
	t.Helper()
	env.WaitFor(t, 30*time.Second, "the default ServiceAccount in "+ns, func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// writeKubeconfig writes the sandbox's admin kubeconfig for the binaries.
func writeKubeconfig(t *testing.T, env *sandboxtest.Env) string {
	t.Helper()
	cfg := env.Sandbox.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["s"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["s"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["s"] = &clientcmdapi.Context{Cluster: "s", AuthInfo: "s"}
	kc.CurrentContext = "s"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
