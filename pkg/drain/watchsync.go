package drain

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// listErrors keeps what an informer's lists and watches answered, instead of
// client-go's default of logging each failure (a library never prints, and
// an unreachable server would log one line a second for as long as the wait
// lasts). A refusal no retry can change (forbidden, unauthorized, not found)
// ends the wait at once.
type listErrors struct {
	mu        sync.Mutex
	last      error
	permanent chan struct{}
	once      sync.Once
}

func newListErrors() *listErrors { return &listErrors{permanent: make(chan struct{})} }

// watch makes inf report its errors here; call it before the informer starts.
func (l *listErrors) watch(inf cache.SharedIndexInformer) error {
	return inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		l.mu.Lock()
		l.last = err
		l.mu.Unlock()
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
			l.once.Do(func() { close(l.permanent) })
		}
	})
}

func (l *listErrors) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// waitForLists waits until every informer has made its first list. It gives
// up when ctx ends, when a list is refused for good, or after bound (zero:
// no bound of its own), and the error names what was listed and the last
// answer the lists got, so a drain never waits forever on a server that does
// not answer.
func waitForLists(ctx context.Context, clk clock.WithTicker, bound time.Duration, what string, errs *listErrors, synced ...cache.InformerSynced) error {
	stop := make(chan struct{})
	var (
		once   sync.Once
		reason error
	)
	end := func(why error) { once.Do(func() { reason = why; close(stop) }) }
	done := make(chan struct{})
	defer close(done)
	go func() {
		var timeout <-chan time.Time
		if bound > 0 {
			timeout = clk.After(bound)
		}
		select {
		case <-done:
		case <-ctx.Done():
			end(context.Cause(ctx))
		case <-errs.permanent:
			end(nil)
		case <-timeout:
			end(fmt.Errorf("not listed within %s", bound))
		}
	}()
	if cache.WaitForCacheSync(stop, synced...) {
		return nil
	}
	<-stop
	last := errs.lastErr()
	switch {
	case reason == nil:
		return fmt.Errorf("listing %s: %w", what, last)
	case last != nil:
		return fmt.Errorf("listing %s: %w; the last attempt: %w", what, reason, last)
	}
	return fmt.Errorf("listing %s: %w", what, reason)
}
