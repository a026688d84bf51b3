package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"tine/model"
	"tine/tui/markdown"
)

// Limits on what the detail pane lays out, so one huge tool output cannot
// stall a frame; the rest is one keypress away in `tine show`.
const (
	maxDetailBytes = 64 << 10
	maxOutputLines = 400
)

// mdKey names one markdown rendering: which text, how wide, which theme.
type mdKey struct {
	text  string
	width int
	dark  bool
}

// markdownMsg carries a finished markdown rendering back to Update; err
// says the renderer panicked, and the pane keeps the plain text.
type markdownMsg struct {
	key mdKey
	out string
	err error
}

// renderMarkdown renders text as markdown off the UI goroutine: a 64 kB
// message takes milliseconds, too long for a keypress.
func renderMarkdown(k mdKey, th markdown.Theme) tea.Cmd {
	return func() (msg tea.Msg) {
		defer func() {
			if p := recover(); p != nil {
				msg = markdownMsg{key: k, err: fmt.Errorf("rendering markdown: %v", p)}
			}
		}()
		return markdownMsg{key: k, out: markdown.Render(k.text, k.width, th)}
	}
}

// maxMarkdown bounds the finished renderings a detail pane keeps.
const maxMarkdown = 256

// keepMarkdown stores a finished rendering, starting over when the cache
// is full (what is on screen is rendered again on the next move).
func (d *detailPane) keepMarkdown(k mdKey, out string) {
	if d.markdown == nil || len(d.markdown) >= maxMarkdown {
		d.markdown = map[mdKey]string{}
	}
	d.markdown[k] = out
}

// detailPane shows the selected message in full and scrolls.
type detailPane struct {
	shown         rowKey
	shownWidth    int
	lines         []string
	offset        int
	width, height int
	markdown      map[mdKey]string
}

// update scrolls the pane; it reports whether the key was for it.
func (d *detailPane) update(msg tea.KeyPressMsg, keys TreeKeys) bool {
	v := nav{cursor: d.offset, offset: d.offset, height: 1}
	k := keys.NavKeys
	switch {
	case key.Matches(msg, k.PageUp):
		v.cursor -= max(d.height-1, 1)
	case key.Matches(msg, k.PageDown):
		v.cursor += max(d.height-1, 1)
	case !v.move(msg, k, len(d.lines)):
		return false
	}
	d.offset = min(max(v.cursor, 0), max(len(d.lines)-d.height, 0))
	return true
}

// view renders the visible part of the pane.
func (d *detailPane) view() string {
	if d.offset >= len(d.lines) {
		return ""
	}
	end := min(d.offset+d.height, len(d.lines))
	return strings.Join(d.lines[d.offset:end], "\n")
}

// set lays out message idx of run rd at the pane's width, using finished
// markdown renderings, and returns commands rendering what is missing.
func (d *detailPane) set(k rowKey, rd *runData, st *Styles) tea.Cmd {
	if d.markdown == nil {
		d.markdown = map[mdKey]string{}
	}
	if k != d.shown || d.width != d.shownWidth {
		d.offset = 0
	}
	d.shown, d.shownWidth = k, d.width
	var missing []tea.Cmd
	md := func(text string) string {
		mk := mdKey{text: text, width: d.width, dark: st.IsDark}
		if out, ok := d.markdown[mk]; ok {
			return out
		}
		missing = append(missing, renderMarkdown(mk, st.Markdown))
		return ansi.Wrap(text, d.width, " -")
	}
	var text string
	switch {
	case k.kind == rowFork:
		text = forkDetail(rd, d.width, st)
	case k.kind == rowMerge && int(k.msg) >= rd.first()+rd.n:
		text = st.Subtle.Render(wrap("The merge's message is not stored yet: its turn has not begun, or ended before it was sent. → goes to the fork merged.", d.width))
	default:
		// A merge line shows the merge's message: the digests.
		text = messageDetail(rd, int(k.msg), d.width, st, md)
	}
	d.lines = strings.Split(text, "\n")
	d.offset = min(d.offset, max(len(d.lines)-d.height, 0))
	return tea.Batch(missing...)
}

// forkDetail describes a fork: where it branched and what it spent.
func forkDetail(rd *runData, width int, st *Styles) string {
	r := rd.run()
	var b strings.Builder
	b.WriteString(st.ForkName.Render("⑂ "+model.SafeText(r.Label())) + "\n")
	row := func(k, v string) {
		if v == "" {
			return
		}
		lines := strings.Split(wrap(model.SafeText(v), max(width-10, 10)), "\n")
		for i, l := range lines {
			if i > 0 {
				k = ""
			}
			fmt.Fprintf(&b, "%s %s\n", st.Subtle.Render(fmt.Sprintf("%-9s", k)), l)
		}
	}
	row("id", r.ID)
	row("status", statusText(r, rd.openEnd))
	row("error", r.Error)
	row("harness", r.Harness)
	row("model", r.Model)
	row("native", r.NativeID)
	if r.ForkAt == 0 {
		// A replay of a session that began it (pi's keeps its own copy).
		row("branched", "before its first message (K=0)")
	} else {
		row("branched", fmt.Sprintf("after message %d (K=%d)", r.ForkAt, r.ForkAt))
	}
	if r.SnapReason != "" {
		row("snapped", fmt.Sprintf("asked %s, snapped to %d: %s", r.Asked, r.ForkAt, r.SnapReason))
	}
	row("messages", fmt.Sprintf("%d own, %d inherited", rd.n, r.ForkAt))
	if r.Handoff {
		row("handoff", "yes: a new session whose first message was the transcript so far")
	}
	row("worktree", r.Worktree)
	if r.Worktree != "" {
		row("branch", r.Branch)
	}
	if !r.OnThisMachine() {
		where := r.Place
		if r.Container != "" {
			where += ", container " + r.Container[:min(12, len(r.Container))]
		}
		row("runs on", where)
		row("branch", r.Branch+" (its work comes back to it after each turn)")
	}
	if worktreeRemoved(r) {
		row("worktree", "removed (tine worktree rm or prune); its branch "+r.Branch+" stays if it has commits of its own")
	}
	if r.BaseCommit != "" {
		row("base", model.ShortID(r.BaseCommit)+" ("+r.BaseCommit+")")
	}
	if r.InPlace {
		row("works in", "place: "+r.Cwd)
	}
	if c := r.Check; c != nil {
		row("check", c.Cmd)
		row("result", checkResult(c))
		if c.Output != "" {
			row("output", tailLines(strings.TrimRight(c.Output, "\n"), 8))
		}
	}
	if r.Best {
		reason := r.BestReason
		if reason == "" {
			reason = "marked by hand"
		}
		row("best", "★ "+reason)
	}
	if rd.aa.Measured > 0 {
		row("A/A", rd.aa.String())
	}
	row("note", r.Note)
	if r.Status == model.Running && r.OwnerPID != 0 {
		row("run by", fmt.Sprintf("process %d", r.OwnerPID))
	}
	if r.CancelRequested && r.Status == model.Running {
		row("cancel", "asked for; waiting for its process to stop it")
	}
	row("tokens", usageLine(r.Usage))
	row("cost", cost(r.CostUSD))
	if !r.Budget.IsZero() {
		row("budget", "at most "+r.Budget.Describe()+" of its own")
	}
	if !r.CreatedAt.IsZero() {
		row("created", r.CreatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if !r.FinishedAt.IsZero() {
		row("finished", r.FinishedAt.Local().Format("2006-01-02 15:04:05"))
	}
	return strings.TrimRight(b.String(), "\n")
}

// checkResult says how a best-of-N check went.
func checkResult(c *model.Check) string {
	var s string
	switch {
	case !c.Ran:
		return "not run yet"
	case c.Error != "":
		s = "error: " + c.Error
	case c.Number && c.Score != nil:
		s = fmt.Sprintf("score %g (exit %d)", *c.Score, c.Exit)
	case c.Exit == 0:
		s = "✓ passed (exit 0)"
	default:
		s = fmt.Sprintf("✗ failed: exit %d", c.Exit)
	}
	if c.Duration > 0 {
		s += fmt.Sprintf(" in %s", c.Duration.Round(10*time.Millisecond))
	}
	return s
}

// tailLines keeps the last n lines of s, saying how many went.
func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return "… " + plural(len(lines)-n, "line") + " before\n" + strings.Join(lines[len(lines)-n:], "\n")
}

func usageLine(u model.Usage) string {
	if u.IsZero() {
		return ""
	}
	s := fmt.Sprintf("in %s · out %s", tokens(u.InputTokens), tokens(u.OutputTokens))
	if u.CacheReadTokens > 0 || u.CacheWriteTokens > 0 {
		s += fmt.Sprintf(" · cache read %s · write %s", tokens(u.CacheReadTokens), tokens(u.CacheWriteTokens))
	}
	return s
}

// messageDetail lays out one message in full: a header, then every part.
// Text goes through md (markdown); everything is made terminal-safe first.
func messageDetail(rd *runData, idx, width int, st *Styles, md func(string) string) string {
	m := rd.message(idx)
	k := idx + 1
	var b strings.Builder
	if !rd.loaded(idx) {
		// Read a page at a time as it comes on screen (bodies.go).
		return st.Subtle.Render(fmt.Sprintf("K=%d · reading the message…", k))
	}
	head := []string{st.role(m.Role).Render(roleLabel(m.Role)), fmt.Sprintf("K=%d", k)}
	if m.Model != "" {
		head = append(head, model.SafeText(m.Model))
	}
	if !m.Time.IsZero() {
		head = append(head, m.Time.Local().Format("2006-01-02 15:04:05"))
	}
	b.WriteString(strings.Join(head, st.Subtle.Render(" · ")) + "\n")
	if u := usageLine(m.Usage); u != "" {
		b.WriteString(st.Tokens.Render("tokens "+u) + "\n")
	}
	if rd.bounds.Safe(k) {
		b.WriteString(st.Checkpoint.Render("● checkpoint: a fork can start after this message") + "\n")
	} else {
		b.WriteString(st.Unsafe.Render("· not a checkpoint: "+rd.bounds.Reason(k)) + "\n")
	}
	b.WriteString(st.Subtle.Render(strings.Repeat("─", max(width, 1))) + "\n")
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p.Kind {
		case model.Text:
			b.WriteString(md(clipBytes(model.SafeText(p.Text))))
		case model.Thinking:
			b.WriteString(st.Thinking.Render(wrap("thinking: "+clipBytes(model.SafeText(p.Text)), width)))
		case model.ToolCall:
			b.WriteString(st.ToolName.Render("⚙ "+model.SafeText(p.ToolName)) + st.Subtle.Render("  "+model.SafeText(p.ToolCallID)) + "\n")
			b.WriteString(wrap(prettyJSON(p.ToolInput), width))
		case model.ToolResult:
			label := "↳ result"
			if p.ToolName != "" {
				label += " of " + model.SafeText(p.ToolName)
			}
			if p.IsError {
				label = st.Error.Render(label + " (error)")
			} else {
				label = st.ToolName.Render(label)
			}
			b.WriteString(label + st.Subtle.Render("  "+model.SafeText(p.ToolCallID)) + "\n")
			b.WriteString(st.ToolOutput.Render(clipLines(wrap(clipBytes(model.SafeText(p.Text)), width))))
		case model.Image:
			b.WriteString(st.Subtle.Render(fmt.Sprintf("[image, %d bytes of JSON]", len(p.Raw))))
		default:
			b.WriteString(st.Subtle.Render(wrap("["+string(p.Kind)+"] "+clipBytes(model.SafeText(p.Raw)), width)))
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

func wrap(s string, width int) string { return ansi.Wrap(s, max(width, 1), " -") }

// prettyJSON indents JSON input for reading; other text passes through.
func prettyJSON(s string) string {
	var out bytes.Buffer
	if json.Indent(&out, []byte(s), "", "  ") == nil {
		return model.SafeText(clipBytes(out.String()))
	}
	return model.SafeText(clipBytes(s))
}

func clipBytes(s string) string {
	if len(s) <= maxDetailBytes {
		return s
	}
	cut := maxDetailBytes
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… %d more bytes (tine show prints all)", len(s)-cut)
}

func clipLines(s string) string {
	lines := strings.SplitN(s, "\n", maxOutputLines+1)
	if len(lines) <= maxOutputLines {
		return s
	}
	rest := strings.Count(lines[maxOutputLines], "\n") + 1
	return strings.Join(lines[:maxOutputLines], "\n") + fmt.Sprintf("\n… %d more lines (tine show prints all)", rest)
}
