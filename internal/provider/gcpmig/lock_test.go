package gcpmig

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A caller waiting for a group another change holds (through operation
// waits that can take minutes) gives up when its ctx ends; other groups are
// not held, and the group is free again once unlocked.
func TestLockGivesUpWhenCtxEnds(t *testing.T) {
	p := &Provider{locks: map[string]chan struct{}{}}
	g := ref{project: "p", zone: "us-east1-b", name: "nodes"}
	unlock, err := p.lock(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		u, err := p.lock(ctx, g)
		if err == nil {
			u()
		}
		waited <- err
	}()
	select {
	case err := <-waited:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("lock of a held group after ctx ended = %v; want ctx's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lock of a held group still waits after its ctx ended")
	}
	other, err := p.lock(context.Background(), ref{project: "p", zone: "us-east1-c", name: "nodes"})
	if err != nil {
		t.Fatalf("lock of another group: %v", err)
	}
	other()
	unlock()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	free, err := p.lock(ctx2, g)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	free()
}
