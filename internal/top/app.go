package top

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// Source is where the app reads the cluster: a Watch, or a test's fixed
// snapshots.
type Source interface {
	Snapshot() Snapshot
	Changed() <-chan struct{}
}

// Explainer says what `sluice explain node` says of a node, from a
// snapshot; internal/cli, which owns explain, provides it.
type Explainer func(s Snapshot, node string) string

// App is the Bubble Tea model of `sluice top`. It holds the last snapshot,
// the selection and the mode; Build and Lines do the rest.
type App struct {
	src     Source
	explain Explainer
	title   string
	styles  Styles

	width, height int
	snap          Snapshot
	screen        Screen

	// selected is the node the cursor is on.
	selected string
	// filter keeps the node rows that contain it; editing while it is
	// typed.
	filter  string
	editing bool
	help    bool
	// detail is the node whose explanation is open; scroll its first line.
	detail string
	scroll int
}

// NewApp returns the app; title names the cluster.
func NewApp(src Source, explain Explainer, title string, styles Styles) *App {
	a := &App{src: src, explain: explain, title: title, styles: styles, width: 80, height: 24}
	a.refresh()
	return a
}

type changedMsg struct{}

type tickMsg struct{}

// tickEvery re-reads the caches for the countdowns; it calls no API.
const tickEvery = time.Second

// Init starts waiting for changes and the countdowns' ticker.
func (a *App) Init() tea.Cmd { return tea.Batch(a.waitChange(), tick()) }

func (a *App) waitChange() tea.Cmd {
	ch := a.src.Changed()
	return func() tea.Msg { <-ch; return changedMsg{} }
}

func tick() tea.Cmd { return tea.Tick(tickEvery, func(time.Time) tea.Msg { return tickMsg{} }) }

func (a *App) refresh() {
	a.snap = a.src.Snapshot()
	a.screen = Build(a.snap)
	nodes := a.nodes()
	if len(nodes) > 0 && !contains(nodes, a.selected) {
		a.selected = nodes[0]
	}
}

// Update handles a message.
func (a *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.width, a.height = msg.Width, msg.Height
	case changedMsg:
		a.refresh()
		return a, a.waitChange()
	case tickMsg:
		a.refresh()
		return a, tick()
	case tea.KeyMsg:
		return a, a.keyMsg(msg)
	}
	return a, nil
}

// keyMsg applies a key press. Runes typed faster than the screen reads
// them come as one message: while a filter is typed they are its text,
// otherwise each is a key of its own.
func (a *App) keyMsg(msg tea.KeyMsg) tea.Cmd {
	if msg.Type != tea.KeyRunes || msg.Paste || len(msg.Runes) < 2 {
		return a.key(msg.String())
	}
	var cmds []tea.Cmd
	for i, r := range msg.Runes {
		if a.editing {
			a.filter += string(msg.Runes[i:])
			a.editFilter("")
			break
		}
		cmds = append(cmds, a.key(string(r)))
	}
	return tea.Batch(cmds...)
}

// key applies a key as k9s does: / filter, ? help, q quit, arrows and j/k
// move, enter opens a node, esc goes back.
func (a *App) key(k string) tea.Cmd {
	if k == "ctrl+c" {
		return tea.Quit
	}
	switch {
	case a.editing:
		a.editFilter(k)
		return nil
	case a.help:
		a.help = false
		return nil
	}
	switch k {
	case "q":
		return tea.Quit
	case "?":
		a.help = true
	case "/":
		a.editing, a.filter = true, ""
	case "esc":
		switch {
		case a.detail != "":
			a.detail = ""
		default:
			a.filter = ""
		}
	case "enter":
		if a.detail == "" && a.selected != "" {
			a.detail, a.scroll = a.selected, 0
		}
	case "up", "k":
		a.move(-1)
	case "down", "j":
		a.move(1)
	case "pgup":
		a.move(-10)
	case "pgdown", " ":
		a.move(10)
	}
	return nil
}

func (a *App) editFilter(k string) {
	switch k {
	case "enter":
		a.editing = false
	case "esc":
		a.editing, a.filter = false, ""
	case "backspace":
		if r := []rune(a.filter); len(r) > 0 {
			a.filter = string(r[:len(r)-1])
		}
	case "":
	default:
		if r := []rune(k); len(r) == 1 {
			a.filter += k
		}
	}
	if nodes := a.nodes(); len(nodes) > 0 && !contains(nodes, a.selected) {
		a.selected = nodes[0]
	}
}

func (a *App) move(by int) {
	if a.detail != "" {
		a.scroll = max(0, a.scroll+by)
		return
	}
	nodes := a.nodes()
	if len(nodes) == 0 {
		return
	}
	i := indexIn(nodes, a.selected) + by
	a.selected = nodes[min(max(i, 0), len(nodes)-1)]
}

// nodes are the selectable nodes, in the order shown.
func (a *App) nodes() []string {
	var out []string
	for _, l := range Lines(a.screen, max(a.width, NarrowWidth), a.filter) {
		if l.Node != "" {
			out = append(out, l.Node)
		}
	}
	return out
}

// View draws the screen: a title line, the filter being typed, the body
// (pools, a node's detail, or the help), and a line of keys.
func (a *App) View() string {
	head := []string{a.titleLine()}
	if a.editing || a.filter != "" {
		cursor := ""
		if a.editing {
			cursor = "_"
		}
		head = append(head, a.styles.render(KindWarn, fit("/"+a.filter+cursor, a.width)))
	}
	foot := a.styles.render(KindDim, fit(a.keysLine(), a.width))
	room := max(a.height-len(head)-1, 1)
	var body []string
	switch {
	case a.help:
		body = a.fixed(helpLines(), room)
	case a.detail != "":
		body = a.detailBody(room)
	default:
		body = a.listBody(room)
	}
	for len(body) < room {
		body = append(body, "")
	}
	return strings.Join(append(append(head, body...), foot), "\n")
}

func (a *App) titleLine() string {
	state := "live"
	if !a.snap.Live() {
		state = "STALE"
	}
	nodes := len(a.snap.Nodes)
	t := fmt.Sprintf("sluice top  %s  %s  %s  %d pools, %d nodes", a.title, a.snap.Now.Local().Format(time.TimeOnly), state, len(a.screen.Pools), nodes)
	if a.detail != "" {
		t += "  > node " + a.detail
	}
	return a.styles.render(KindTitle, fit(t, a.width))
}

func (a *App) keysLine() string {
	switch {
	case a.editing:
		return "type to filter  <enter> keep  <esc> clear"
	case a.detail != "":
		return "<esc> back  <j/k> scroll  <q> quit"
	}
	return "<enter> explain node  </> filter  <j/k> move  <?> help  <q> quit"
}

// listBody is the pools' lines, scrolled so the selected node is in view.
func (a *App) listBody(room int) []string {
	lines := Lines(a.screen, a.width, a.filter)
	at := 0
	for i, l := range lines {
		if l.Node != "" && l.Node == a.selected {
			at = i
		}
	}
	start := 0
	if at >= room {
		start = at - room/2
	}
	end := min(start+room, len(lines))
	out := make([]string, 0, room)
	for _, l := range lines[start:end] {
		text, kind := l.Text, l.Kind
		if l.Node != "" && l.Node == a.selected {
			text = ">" + strings.TrimPrefix(text, " ")
			out = append(out, a.styles.selected(text))
			continue
		}
		out = append(out, a.styles.render(kind, text))
	}
	return out
}

// detailBody is what explain says of the node, then its drain as it
// happens.
func (a *App) detailBody(room int) []string {
	var lines []string
	if a.explain != nil {
		lines = append(lines, strings.Split(strings.TrimRight(a.explain(a.snap, a.detail), "\n"), "\n")...)
	}
	lines = append(lines, "")
	lines = append(lines, DrainLines(a.snap, a.detail)...)
	if !a.snap.Live() {
		lines = append([]string{"! not live: as of the lost connection"}, lines...)
	}
	a.scroll = min(a.scroll, max(len(lines)-room, 0))
	return a.fixed(lines[a.scroll:], room)
}

func (a *App) fixed(lines []string, room int) []string {
	out := make([]string, 0, room)
	for i, l := range lines {
		if i == room {
			break
		}
		kind := KindText
		if strings.HasPrefix(l, "!") {
			kind = KindAlert
		}
		out = append(out, a.styles.render(kind, fit(l, a.width)))
	}
	return out
}

func helpLines() []string {
	return []string{
		"KEYS",
		"  j, down / k, up     move between nodes (in a node: scroll)",
		"  space, pgdown/pgup  move ten",
		"  enter               explain the node and follow its drain",
		"  esc                 back; clear the filter",
		"  /                   filter nodes by name, pool, state or mark; enter keeps it",
		"  ?                   this help (any key closes it)",
		"  q, ctrl+c           quit",
		"",
		"READING IT",
		"  allowed/limit  per reason: how many more nodes the budgets allow now, of how many",
		"  (N in use)     nodes being disrupted for that reason now",
		"  states         blocked, draining, deleting, replacing, booting, not-ready, cordoned, serving",
		"  [marks]        drifted, expired, expires in, a maintenance event's countdown, a drain's deadline",
		"  ~              stale: the connection is lost and the row is as of then",
		"",
		"  Counts come from the functions sluice's controller decides with. The view only watches;",
		"  for a line per change in a script or a log use `sluice status -w`.",
	}
}

// Styles draws kinds of lines; without colour every line is plain and the
// words carry the meaning.
type Styles struct {
	color bool
	kinds map[Kind]lipgloss.Style
	sel   lipgloss.Style
}

// NewStyles returns the styles for r; color false (NO_COLOR, a dumb
// terminal) draws plain text, the selected line marked by ">" alone.
func NewStyles(r *lipgloss.Renderer, color bool) Styles {
	s := Styles{color: color}
	if !color {
		return s
	}
	s.kinds = map[Kind]lipgloss.Style{
		KindTitle:  r.NewStyle().Bold(true),
		KindHeader: r.NewStyle().Bold(true),
		KindAlert:  r.NewStyle().Foreground(lipgloss.Color("9")).Bold(true),
		KindWarn:   r.NewStyle().Foreground(lipgloss.Color("11")),
		KindDim:    r.NewStyle().Faint(true),
	}
	s.sel = r.NewStyle().Reverse(true)
	return s
}

func (s Styles) render(k Kind, text string) string {
	if st, ok := s.kinds[k]; ok && s.color {
		return st.Render(text)
	}
	return text
}

func (s Styles) selected(text string) string {
	if s.color {
		return s.sel.Render(text)
	}
	return text
}

func contains(list []string, s string) bool { return indexIn(list, s) >= 0 }

func indexIn(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
