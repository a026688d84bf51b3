package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"tine/harness/fork"
	"tine/model"
)

// Limits on the diff a view holds; git in the worktree shows the rest.
const (
	maxDiffBytes = 8 << 20
	maxDiffLines = 100_000
)

// diffView is one fork's whole diff against the files its worktree
// started with (its base commit, with what was uncommitted in its checkout
// carried over), full screen and scrolling.
type diffView struct {
	runID, label string
	head         string // the title line, without what the diff is against
	base         string // the commit the worktree was made from
	carried      bool   // it started with uncommitted work carried over
	lines        []string
	loading      bool
	err          string
	offset       int
	width        int
	height       int // of the lines, below the title
}

// diffLoadedMsg carries a fork's diff; runID says whose it is.
type diffLoadedMsg struct {
	runID string
	text  string
	err   error
	// carried: the worktree started with uncommitted work of its checkout,
	// so the diff is not against the base commit alone.
	carried bool
}

func newDiffView(col compareColumn, w, h int) *diffView {
	r := col.run
	v := &diffView{runID: r.ID, label: col.label, loading: true, base: r.BaseCommit}
	head := "diff of " + model.SafeText(col.label)
	if r.Branch != "" {
		head += " (⎇ " + model.SafeText(r.Branch) + ")"
	}
	v.head = head
	v.setSize(w, h)
	return v
}

// title is the title line: what the diff is against, once known.
func (v *diffView) title() string {
	switch {
	case v.base == "":
		return v.head
	case v.carried:
		return v.head + " against what it started with: " + model.ShortID(v.base) + " and the uncommitted work of its checkout"
	default:
		return v.head + " against " + model.ShortID(v.base)
	}
}

// loadDiff reads a worktree's diff off the UI goroutine, against the
// files it started with (start, else its base commit), and whether those
// were more than the base commit's.
func loadDiff(ctx context.Context, r model.Run) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		text, carried, err := fork.Diff(ctx, r)
		return diffLoadedMsg{runID: r.ID, text: text, err: err, carried: carried}
	}
}

// loaded takes the diff in. Its text is the fork's own files, untrusted:
// it is made safe before anything of it reaches the terminal.
func (v *diffView) loaded(msg diffLoadedMsg, _ *Styles) {
	v.loading = false
	v.carried = msg.carried
	if msg.err != nil {
		v.err = errorText(msg.err)
		return
	}
	text := msg.text
	more := ""
	if len(text) > maxDiffBytes {
		cut := maxDiffBytes
		for cut > 0 && text[cut]&0xc0 == 0x80 {
			cut--
		}
		more = fmt.Sprintf("… %d more bytes (git diff in the worktree shows all)", len(text)-cut)
		text = text[:cut]
	}
	v.lines = strings.Split(strings.TrimRight(model.SafeText(text), "\n"), "\n")
	if len(v.lines) > maxDiffLines {
		more = fmt.Sprintf("… %d more lines (git diff in the worktree shows all)", len(v.lines)-maxDiffLines)
		v.lines = v.lines[:maxDiffLines]
	}
	if more != "" {
		v.lines = append(v.lines, more)
	}
	if len(v.lines) == 1 && v.lines[0] == "" {
		v.lines = nil
	}
}

func (v *diffView) setSize(w, h int) {
	v.width, v.height = w, max(h-1, 1)
	v.clamp()
}

func (v *diffView) clamp() {
	v.offset = min(max(v.offset, 0), max(len(v.lines)-v.height, 0))
}

// update scrolls the diff.
func (v *diffView) update(msg tea.KeyPressMsg, keys DiffKeys) {
	n := nav{cursor: v.offset, offset: v.offset, height: 1}
	switch {
	case key.Matches(msg, keys.PageUp):
		v.offset -= max(v.height-1, 1)
	case key.Matches(msg, keys.PageDown):
		v.offset += max(v.height-1, 1)
	case key.Matches(msg, keys.Bottom):
		v.offset = len(v.lines)
	case n.move(msg, keys.NavKeys, len(v.lines)):
		v.offset = n.cursor
	}
	v.clamp()
}

// view renders the title and the visible lines, coloured by what they are.
func (v *diffView) view(st *Styles) string {
	head := st.Title.Render(v.title())
	switch {
	case v.loading:
		return head + "\n" + st.Subtle.Render("reading the diff…")
	case v.err != "":
		return head + "\n" + st.Error.Render(wrap(v.err, max(v.width, 10)))
	case len(v.lines) == 0:
		return head + "\n" + st.Subtle.Render("no changes since it started")
	}
	if len(v.lines) > v.height {
		head += st.Subtle.Render(fmt.Sprintf("  lines %d–%d of %d", v.offset+1, min(v.offset+v.height, len(v.lines)), len(v.lines)))
	}
	var b strings.Builder
	b.WriteString(head)
	end := min(v.offset+v.height, len(v.lines))
	for _, l := range v.lines[v.offset:end] {
		b.WriteByte('\n')
		l = fit(l, v.width)
		switch {
		case strings.HasPrefix(l, "diff --git"), strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
			l = st.DiffFile.Render(l)
		case strings.HasPrefix(l, "@@"):
			l = st.DiffHunk.Render(l)
		case strings.HasPrefix(l, "+"):
			l = st.DiffAdd.Render(l)
		case strings.HasPrefix(l, "-"):
			l = st.DiffDel.Render(l)
		}
		b.WriteString(l)
	}
	return b.String()
}
