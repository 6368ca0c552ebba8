package top

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// fixed is a Source that always has the same snapshot.
type fixed struct{ s Snapshot }

func (f fixed) Snapshot() Snapshot       { return f.s }
func (f fixed) Changed() <-chan struct{} { return nil }

func press(a *App, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		a.Update(msg)
	}
}

// The keys a k9s user expects, on a plain (NO_COLOR) screen: the cursor
// starts on the first node, j moves it, / filters, enter opens the node's
// explanation and drain, esc comes back, ? helps, q quits.
func TestAppKeys(t *testing.T) {
	explained := ""
	a := NewApp(fixed{fleet()}, func(_ Snapshot, node string) string {
		explained = node
		return "Node: " + node + "\n\nVerdict: explained"
	}, "test", Styles{})
	a.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	view := a.View()
	if !strings.Contains(view, "> batch-blocked") || strings.Contains(view, "\x1b[") {
		t.Fatalf("the cursor is not on the first node, or NO_COLOR drew colour:\n%s", view)
	}
	press(a, "j")
	if !strings.Contains(a.View(), "> batch-draining") {
		t.Fatalf("j did not move to the next node:\n%s", a.View())
	}
	press(a, "/", "s", "p", "o", "t", "enter")
	view = a.View()
	if !strings.Contains(view, "/spot") || !strings.Contains(view, "> batch-spot") || strings.Contains(view, "batch-serving") {
		t.Fatalf("filter spot:\n%s", view)
	}
	// Typed faster than read: one message of many runes.
	press(a, "esc", "/batch-dr")
	a.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if view := a.View(); !strings.Contains(view, "/batch-dr\n") || !strings.Contains(view, "> batch-draining") || strings.Contains(view, "batch-serving") {
		t.Fatalf("a filter typed in one burst:\n%s", view)
	}
	press(a, "esc")
	if !strings.Contains(a.View(), "batch-serving") {
		t.Fatalf("esc did not clear the filter:\n%s", a.View())
	}
	if !strings.Contains(a.View(), "> batch-draining") {
		t.Fatalf("clearing the filter moved the cursor:\n%s", a.View())
	}
	press(a, "enter")
	view = a.View()
	if explained != "batch-draining" || !strings.Contains(view, "Verdict: explained") ||
		!strings.Contains(view, "Pods: 2 of 4 left") || !strings.Contains(view, "shop/w-1") || !strings.Contains(view, "DrainStarted") {
		t.Fatalf("enter on batch-draining (explained %q):\n%s", explained, view)
	}
	press(a, "esc")
	if !strings.Contains(a.View(), "> batch-draining") {
		t.Fatalf("esc did not come back to the list:\n%s", a.View())
	}
	press(a, "?")
	if !strings.Contains(a.View(), "KEYS") {
		t.Fatalf("? shows no help:\n%s", a.View())
	}
	press(a, "x")
	if strings.Contains(a.View(), "KEYS") {
		t.Fatal("a key did not close the help")
	}
	_, cmd := a.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	if cmd == nil || cmd() != tea.Quit() {
		t.Fatal("q does not quit")
	}
}

// A screen shorter than its lines keeps the cursor's node in view.
func TestAppScrollsToTheCursor(t *testing.T) {
	a := NewApp(fixed{fleet()}, nil, "test", Styles{})
	a.Update(tea.WindowSizeMsg{Width: 120, Height: 8})
	for range 7 {
		press(a, "j")
	}
	view := a.View()
	if got := strings.Count(view, "\n") + 1; got != 8 {
		t.Errorf("%d lines on an 8-line screen:\n%s", got, view)
	}
	if !strings.Contains(view, "> batch-spot") {
		t.Errorf("the cursor's node is out of view:\n%s", view)
	}
}
