package capi

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox/capi"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// world is one test's Cluster API: the package's manager and infrastructure
// provider (started once, with the first test that needs them), and a
// Cluster of the test's own in its namespace.
type world struct {
	*sandboxtest.Env
	dyn     dynamic.Interface
	cluster string
}

var (
	startOnce sync.Once
	startErr  error
)

func newWorld(t *testing.T) *world {
	t.Helper()
	env := sandboxtest.New(t)
	tools := testenv.Tool(t, capi.ToolsEnv, "run hack/tools/capi.sh and set "+capi.ToolsEnv+" to the directory it prints (make test does)")
	startOnce.Do(func() {
		ctx := context.Background()
		start := time.Now()
		if _, err := capi.Start(ctx, env.Sandbox, tools); err != nil {
			startErr = fmt.Errorf("starting Cluster API: %w", err)
			return
		}
		if _, err := capi.StartInfra(ctx, env.Sandbox, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
			startErr = err
			return
		}
		fmt.Fprintf(os.Stderr, "capi: Cluster API's controllers ready in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if startErr != nil {
		t.Fatal(startErr)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{Env: env, dyn: dyn, cluster: "sandbox"}
	if err := capi.CreateCluster(context.Background(), env.Sandbox, env.Namespace, w.cluster); err != nil {
		t.Fatal(err)
	}
	return w
}

// machines lists the namespace's Machines.
func (w *world) machines(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	l, err := w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}
