package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// readNodesFrom makes c.nodes read the manager's node informer: the
// cache's own objects, as pointers, none copied. A pass reads them only.
func (c *Controller) readNodesFrom(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("watching nodes: the cache's informer is a %T, not a SharedIndexInformer", inf)
	}
	indexer := sii.GetIndexer()
	c.nodes = func() []*corev1.Node { return asNodes(indexer.List()) }
	// Nodes by each of their labels: a pool's members are found among the
	// nodes carrying its selector's rarest label, not among every node.
	// An informer already running takes no index (one shared with a
	// controller set up before): every node is read then.
	if err := sii.AddIndexers(toolscache.Indexers{indexLabel: labelPairs}); err != nil {
		return nil
	}
	c.labelled = func(key, value string) ([]*corev1.Node, bool) {
		objs, err := indexer.ByIndex(indexLabel, key+"="+value)
		if err != nil {
			return nil, false
		}
		return asNodes(objs), true
	}
	return nil
}

// indexLabel indexes nodes by each "key=value" of their labels.
const indexLabel = "sluice-label"

func labelPairs(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(n.Labels))
	for k, v := range n.Labels {
		out = append(out, k+"="+v)
	}
	return out, nil
}

func asNodes(objs []any) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// candidates is the nodes that may be the pool's members: those carrying
// the rarest of its selector's matchLabels, or every node (nodes) when
// it has none or the index is not there. MembersOf still matches each
// against the whole selector.
func (c *Controller) candidates(pool *v1alpha1.NodePool, nodes []*corev1.Node) []*corev1.Node {
	if c.labelled == nil || len(pool.Spec.NodeSelector.MatchLabels) == 0 {
		return nodes
	}
	var best []*corev1.Node
	found := false
	for k, v := range pool.Spec.NodeSelector.MatchLabels {
		on, ok := c.labelled(k, v)
		if !ok {
			return nodes
		}
		if !found || len(on) < len(best) {
			best, found = on, true
		}
	}
	return best
}

// membershipChanged passes the pool changes that can move a node from one
// pool to another.
var membershipChanged = pools.Changed(nil)

// MembersOfEach is Members for several pools over one list of nodes, with
// each pool's members looked for among the nodes carrying its selector's
// rarest label (an index built once), as the controller's pass does: at
// 5,000 nodes and 100 pools, matching every selector against every node
// was most of `sluice status`.
func MembersOfEach(chosen []*v1alpha1.NodePool, nodes []corev1.Node, all []v1alpha1.NodePool) map[string][]*corev1.Node {
	every := pointers(nodes)
	byLabel := map[string][]*corev1.Node{}
	for _, n := range every {
		for k, v := range n.Labels {
			byLabel[k+"="+v] = append(byLabel[k+"="+v], n)
		}
	}
	c := &Controller{labelled: func(k, v string) ([]*corev1.Node, bool) { return byLabel[k+"="+v], true }}
	out := make(map[string][]*corev1.Node, len(chosen))
	for _, pool := range chosen {
		out[pool.Name] = MembersOf(pool, c.candidates(pool, every), all)
	}
	return out
}
