package nodepool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// For returns the pool whose nodeSelector matches the node, pointing into
// pools, or nil when none does: the node then gets the default policy.
//
// For always decides, so every replica and every run applies the same policy
// to a node; a non-nil error only explains a decision worth a warning:
//   - *AmbiguousError: several pools match; For returns the oldest
//     (by creationTimestamp, then name).
//   - *SelectorError: a pool's nodeSelector does not parse (the API server
//     does not check selectors inside custom resources); For passes over it.
//
// Both may come together; find them with errors.As.
func For(node *corev1.Node, pools []v1alpha1.NodePool) (*v1alpha1.NodePool, error) {
	return NewMatcher(pools).For(node)
}

// Matcher answers For for many nodes against one list of pools, parsing each
// pool's selector once: a controller that places 1,000 nodes among 20 pools
// parses 20 selectors, not 20,000.
type Matcher struct {
	pools []matcherPool
}

type matcherPool struct {
	pool *v1alpha1.NodePool
	sel  labels.Selector
	err  error
}

// NewMatcher parses the pools' selectors; the Matcher points into pools.
func NewMatcher(pools []v1alpha1.NodePool) *Matcher {
	m := &Matcher{pools: make([]matcherPool, len(pools))}
	for i := range pools {
		p := &pools[i]
		sel, err := parsedSelector(p)
		switch {
		case err != nil:
			err = &SelectorError{Pool: p.Name, Err: err}
		case sel.Empty():
			// An empty selector matches everything; the CRD refuses it, and
			// a pool that slipped through must not claim every node.
			err = &SelectorError{Pool: p.Name, Err: errors.New("empty selector")}
		}
		m.pools[i] = matcherPool{pool: p, sel: sel, err: err}
	}
	return m
}

// parsed holds a pool's parsed nodeSelector at one resourceVersion.
type parsed struct {
	version string
	sel     labels.Selector
	err     error
}

// selectorCache keeps each pool's parsed nodeSelector by UID, at its latest
// resourceVersion (any write to the pool changes it): For is
// asked once per node reconcile, and parsing every pool's selector each
// time was most of a reconcile at 5,000 nodes and 100 pools. A pool with no
// UID or version (one built in a test or by hand) is parsed each time.
var selectorCache = struct {
	sync.Mutex
	byUID map[types.UID]parsed
}{byUID: map[types.UID]parsed{}}

func parsedSelector(p *v1alpha1.NodePool) (labels.Selector, error) {
	if p.UID == "" || p.ResourceVersion == "" {
		return metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
	}
	selectorCache.Lock()
	got, ok := selectorCache.byUID[p.UID]
	selectorCache.Unlock()
	if ok && got.version == p.ResourceVersion {
		return got.sel, got.err
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
	selectorCache.Lock()
	selectorCache.byUID[p.UID] = parsed{version: p.ResourceVersion, sel: sel, err: err}
	selectorCache.Unlock()
	return sel, err
}

// For is the package's For against the Matcher's pools.
func (m *Matcher) For(node *corev1.Node) (*v1alpha1.NodePool, error) {
	var (
		matched []*v1alpha1.NodePool
		errs    []error
	)
	set := labels.Set(node.Labels)
	for _, p := range m.pools {
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		if p.sel.Matches(set) {
			matched = append(matched, p.pool)
		}
	}
	if len(matched) == 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(matched, oldestFirst)
	if len(matched) > 1 {
		names := make([]string, len(matched))
		for i, p := range matched {
			names[i] = p.Name
		}
		errs = append(errs, &AmbiguousError{Node: node.Name, Pools: names})
	}
	return matched[0], errors.Join(errs...)
}

// AmbiguousError reports a node that several pools select. The node follows
// the first, the oldest.
type AmbiguousError struct {
	Node string
	// Pools are the names of the pools that select the node, oldest first.
	Pools []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("node %s is selected by %d node pools (%s); it follows the oldest, %s: make their nodeSelectors disjoint",
		e.Node, len(e.Pools), strings.Join(e.Pools, ", "), e.Pools[0])
}

// SelectorError reports a pool whose nodeSelector cannot select nodes; the
// pool applies to no node until it is fixed.
type SelectorError struct {
	Pool string
	Err  error
}

func (e *SelectorError) Error() string {
	return fmt.Sprintf("node pool %s: invalid nodeSelector, so it selects no node: %v", e.Pool, e.Err)
}

func (e *SelectorError) Unwrap() error { return e.Err }

func oldestFirst(a, b *v1alpha1.NodePool) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
