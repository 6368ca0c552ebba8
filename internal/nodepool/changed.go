package nodepool

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Changed passes the NodePool events that can change what a controller
// decides for nodes: a pool made or deleted, an edit of its nodeSelector
// (which moves nodes from pool to pool: the oldest pool selecting a node
// owns it), and an edit of what read returns (nil reads nothing more).
// Every other edit passes by: at 100 pools and 5,000 nodes, a limit's edit
// that queued every node of every controller was most of a pass's cost.
func Changed(read func(*v1alpha1.NodePool) any) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*v1alpha1.NodePool)
			n, okN := e.ObjectNew.(*v1alpha1.NodePool)
			if !okO || !okN || !equality.Semantic.DeepEqual(o.Spec.NodeSelector, n.Spec.NodeSelector) {
				return true
			}
			return read != nil && !equality.Semantic.DeepEqual(read(o), read(n))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
