package termination

import (
	"errors"
	"testing"
)

// A node's timelines are written in the order of its drains: the write of a
// drain that a later one replaced never lands over the later one's.
func TestTimelineWritesKeepTheLatestDrain(t *testing.T) {
	var w timelineWrites
	var written []uint64
	save := func(seq uint64) func() error {
		return func() error { written = append(written, seq); return nil }
	}
	older, newer := w.enter("n1"), w.enter("n1")
	if older != newer {
		t.Fatal("two writes of one node do not share its order")
	}
	if err := newer.write(7, save(7)); err != nil {
		t.Fatal(err)
	}
	w.leave("n1")
	if err := older.write(3, save(3)); err != nil {
		t.Fatal(err)
	}
	w.leave("n1")
	if len(written) != 1 || written[0] != 7 {
		t.Errorf("written %v; want only the later drain's (7)", written)
	}
	if len(w.nodes) != 0 {
		t.Errorf("%d nodes remembered after their writes; want none", len(w.nodes))
	}

	// A failed write does not count as written: an older drain's may still land.
	n := w.enter("n2")
	if err := n.write(9, func() error { return errors.New("API server unreachable") }); err == nil {
		t.Fatal("the failure was lost")
	}
	if err := n.write(4, save(4)); err != nil || written[len(written)-1] != 4 {
		t.Errorf("after a failed write of 9, the write of 4: %v, written %v", err, written)
	}
	w.leave("n2")
}
