package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"tine/model"
	"tine/replay"
)

// runJSON is a run as `ls` and `show` print it; keys may be added, never removed.
type runJSON struct {
	ID         string      `json:"id"`
	Tree       string      `json:"tree"`
	Parent     string      `json:"parent"`
	ForkAt     int         `json:"fork_at"`
	Asked      string      `json:"asked,omitempty"`
	Snapped    string      `json:"snapped_reason,omitempty"`
	Name       string      `json:"name"`
	Harness    string      `json:"harness"`
	NativeID   string      `json:"native_id"`
	Model      string      `json:"model,omitempty"`
	Status     string      `json:"status"`
	Error      string      `json:"error,omitempty"`
	Messages   int         `json:"messages"`
	Title      string      `json:"title"`
	Cwd        string      `json:"cwd"`
	CreatedAt  time.Time   `json:"created_at"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
	Usage      model.Usage `json:"usage"`
	CostUSD    float64     `json:"cost_usd"`
	Hidden     bool        `json:"hidden,omitempty"`
	SpawnedBy  string      `json:"spawned_by,omitempty"`
	Best       bool        `json:"best,omitempty"`
	Worktree   string      `json:"worktree,omitempty"`
	Branch     string      `json:"branch,omitempty"`
	Handoff    bool        `json:"handoff,omitempty"`
	Check      *checkJSON  `json:"check,omitempty"`
	// Replay says how a run made by tine replay came about.
	Replay *lsReplayJSON `json:"replay,omitempty"`
}

// lsReplayJSON is a replay's row as ls prints it.
type lsReplayJSON struct {
	Of         string          `json:"of"`
	Step       int             `json:"step"`
	Status     string          `json:"status"`
	Replayed   int             `json:"replayed"`
	AA         *bool           `json:"aa"`
	Divergence json.RawMessage `json:"divergence"`
}

func toLsReplay(r model.Replay) *lsReplayJSON {
	j := &lsReplayJSON{Of: r.Of, Step: r.Step, Status: string(r.Status), Replayed: r.Replayed, AA: r.AA, Divergence: json.RawMessage("null")}
	if r.Divergence != "" && json.Valid([]byte(r.Divergence)) {
		j.Divergence = json.RawMessage(r.Divergence)
	}
	return j
}

// replayStatus is a replay's status as ls's STATUS column adds it.
func replayStatus(r model.Replay) string {
	s := fmt.Sprintf(" (%s replay to step %d", r.Status, r.Step)
	if d := replay.DivergenceOf(r); d != nil && r.Status == model.ReplayDiverged {
		s += fmt.Sprintf(": %s at step %d", d.Kind, d.Step)
	}
	return s + ")"
}

func toRunJSON(r model.Run) runJSON {
	j := runJSON{
		ID: r.ID, Tree: r.TreeID, Parent: r.ParentID, ForkAt: r.ForkAt, Asked: r.Asked, Snapped: r.SnapReason,
		Name: r.Name, Harness: r.Harness, NativeID: r.NativeID, Model: r.Model, Status: string(r.Status),
		Error: r.Error, Messages: r.Len(), Title: r.Title, Cwd: r.Cwd, CreatedAt: r.CreatedAt,
		Usage: r.Usage, CostUSD: r.CostUSD, Hidden: r.Hidden, SpawnedBy: r.SpawnedBy, Best: r.Best,
		Worktree: r.Worktree, Branch: r.Branch, Handoff: r.Handoff, Check: toCheckJSON(r.Check),
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt
		j.FinishedAt = &t
	}
	return j
}

type partJSON struct {
	Kind       string `json:"kind"`
	Text       string `json:"text,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	ToolInput  string `json:"tool_input,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	Raw        string `json:"raw,omitempty"`
}

type messageJSON struct {
	K         int         `json:"k"`
	Role      string      `json:"role"`
	Model     string      `json:"model,omitempty"`
	Time      *time.Time  `json:"time,omitempty"`
	NativeID  string      `json:"native_id,omitempty"`
	Usage     model.Usage `json:"usage"`
	Parts     []partJSON  `json:"parts"`
	Inherited bool        `json:"inherited"`
}

type showJSON struct {
	runJSON
	Checkpoints []int         `json:"checkpoints"`
	Transcript  []messageJSON `json:"messages"`
}

// MarshalJSON flattens the run's keys next to "messages", which here is
// the transcript rather than the count.
func (s showJSON) MarshalJSON() ([]byte, error) {
	run, err := json.Marshal(s.runJSON)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(run, &m); err != nil {
		return nil, err
	}
	m["message_count"] = m["messages"]
	if m["messages"], err = json.Marshal(s.Transcript); err != nil {
		return nil, err
	}
	if m["checkpoints"], err = json.Marshal(s.Checkpoints); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func toShowJSON(r model.Run, msgs []model.Message, inherited int) showJSON {
	s := showJSON{runJSON: toRunJSON(r), Checkpoints: model.Checkpoints(msgs), Transcript: make([]messageJSON, len(msgs))}
	for i, m := range msgs {
		mj := messageJSON{K: i + 1, Role: string(m.Role), Model: m.Model, NativeID: m.NativeID, Usage: m.Usage,
			Inherited: i < inherited, Parts: make([]partJSON, len(m.Parts))}
		if !m.Time.IsZero() {
			t := m.Time
			mj.Time = &t
		}
		for j, p := range m.Parts {
			mj.Parts[j] = partJSON{Kind: string(p.Kind), Text: p.Text, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
				ToolInput: p.ToolInput, IsError: p.IsError, Raw: p.Raw}
		}
		s.Transcript[i] = mj
	}
	return s
}

// writeJSON prints v indented. encoding/json escapes C0 controls; C1
// controls (U+0080-U+009F), which some terminals obey, are escaped here too.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeC1(buf.Bytes()))
	return err
}

func escapeC1(b []byte) []byte {
	if !bytes.Contains(b, []byte{0xc2}) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f {
			out = fmt.Appendf(out, `\u%04x`, b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func cmdLs(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "ls", "[--json] [--all]", "List every tree and its runs: roots first, forks indented under their parents.")
	asJSON := f.Bool("json", false, "print JSON")
	all := f.Bool("all", false, "include hidden runs")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	// Subagents are listed under the run that spawned them, not as trees.
	var trees []*model.Node
	spawned := map[string][]*model.Node{}
	for _, t := range model.BuildTrees(runs) {
		if t.Run.SpawnedBy != "" {
			spawned[t.Run.SpawnedBy] = append(spawned[t.Run.SpawnedBy], t)
		} else {
			trees = append(trees, t)
		}
	}
	type line struct {
		n     *model.Node
		depth int
		sub   bool
	}
	var lines []line
	var walk func(n *model.Node, depth int, sub bool)
	walk = func(n *model.Node, depth int, sub bool) {
		under := depth + 1
		if *all || !n.Run.Hidden {
			lines = append(lines, line{n, depth, sub})
		} else {
			under = depth // its forks (what replaced it) take its place
		}
		for _, c := range n.Children {
			walk(c, under, false)
		}
		for _, s := range spawned[n.Run.ID] {
			walk(s, under, true)
		}
	}
	for _, t := range trees {
		walk(t, 0, false)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	replays, err := st.Replays(ctx, ids)
	if err != nil {
		return err
	}
	if *asJSON {
		out := []runJSON{}
		for _, l := range lines {
			j := toRunJSON(l.n.Run)
			if r, ok := replays[l.n.Run.ID]; ok {
				j.Replay = toLsReplay(r)
			}
			out = append(out, j)
		}
		return writeJSON(e.stdout, out)
	}
	if len(trees) == 0 {
		fmt.Fprintln(e.stdout, "No runs yet. Import with: tine import (every agent session here), tine import FILE, or try: tine demo")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tHARNESS\tSTATUS\tK\tMSGS\tTOKENS\tCOST\tTITLE")
	for _, l := range lines {
		r := l.n.Run
		indent := strings.Repeat("  ", l.depth)
		k, title := "", ""
		switch {
		case l.sub:
			indent += "⤷ "
			title = "subagent: " + model.OneLine(r.Title, 50)
		case r.ParentID != "":
			k = fmt.Sprint(r.ForkAt)
		default:
			title = model.OneLine(r.Title, 60)
		}
		status := string(r.Status)
		if rp, ok := replays[r.ID]; ok {
			status += replayStatus(rp)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", indent, model.ShortID(r.ID),
			model.OneLine(r.Name, 30), r.Harness, status, k, r.Len(), r.Usage.Total(), costText(r.CostUSD), title)
	}
	return tw.Flush()
}

// costText is dollars spent the one way tine writes them (as the TUI
// does): "-" for nothing, "<$0.01" under a cent, else to the cent.
func costText(usd float64) string {
	switch {
	case usd <= 0:
		return "-"
	case usd < 0.01:
		return "<$0.01"
	case usd < 100:
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.0f", usd)
}

// loadRun resolves ref and reads its full transcript.
func loadRun(ctx context.Context, e *env, ref string) (model.Run, []model.Message, int, error) {
	st, err := e.open()
	if err != nil {
		return model.Run{}, nil, 0, err
	}
	defer st.Close()
	r, err := st.Resolve(ctx, ref)
	if err != nil {
		return model.Run{}, nil, 0, err
	}
	msgs, inherited, err := st.Messages(ctx, r.ID)
	return r, msgs, inherited, err
}

func cmdShow(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "show", "RUN [--json]", "Print a run's messages, each numbered by the boundary K right after it.\nInherited messages (a fork's prefix) are marked with │. ● marks a checkpoint.")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	r, msgs, inherited, err := loadRun(ctx, e, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, toShowJSON(r, msgs, inherited))
	}
	writeShow(e.stdout, r, msgs, inherited)
	return nil
}

// writeShow prints a run for people; all transcript text is made safe.
func writeShow(w io.Writer, r model.Run, msgs []model.Message, inherited int) {
	safe := model.SafeText
	fmt.Fprintf(w, "run %s", r.ID)
	if r.Name != "" {
		fmt.Fprintf(w, " (%s)", safe(r.Name))
	}
	fmt.Fprintf(w, " · %s · %s · %d messages\n", r.Harness, r.Status, len(msgs))
	if r.Title != "" {
		fmt.Fprintf(w, "title  %s\n", model.OneLine(r.Title, 0))
	}
	if r.ParentID != "" {
		fmt.Fprintf(w, "fork of %s at K=%d", r.ParentID, r.ForkAt)
		if r.SnapReason != "" {
			fmt.Fprintf(w, " (asked %s, snapped: %s)", r.Asked, r.SnapReason)
		}
		fmt.Fprintln(w)
	}
	if !r.Usage.IsZero() || r.CostUSD > 0 {
		fmt.Fprintf(w, "own usage  in %d · out %d", r.Usage.InputTokens, r.Usage.OutputTokens)
		if r.CostUSD > 0 {
			fmt.Fprintf(w, " · %s", costText(r.CostUSD))
		}
		fmt.Fprintln(w)
	}
	b := model.NewBoundaries(msgs)
	width := len(fmt.Sprint(len(msgs)))
	for i, m := range msgs {
		k := i + 1
		gutter := " "
		if i < inherited {
			gutter = "│"
		}
		mark := "●"
		if !b.Safe(k) {
			mark = "·"
		}
		head := []string{string(m.Role)}
		if m.Model != "" {
			head = append(head, safe(m.Model))
		}
		if !m.Usage.IsZero() {
			head = append(head, fmt.Sprintf("in %d out %d", m.Usage.InputTokens, m.Usage.OutputTokens))
		}
		fmt.Fprintf(w, "\n%s%*d %s %s\n", gutter, width, k, mark, strings.Join(head, " · "))
		indent := gutter + strings.Repeat(" ", width+3)
		for _, p := range m.Parts {
			var body string
			switch p.Kind {
			case model.Text:
				body = p.Text
			case model.Thinking:
				body = "(thinking) " + p.Text
			case model.ToolCall:
				body = fmt.Sprintf("⚙ %s %s  [%s]", p.ToolName, p.ToolInput, p.ToolCallID)
			case model.ToolResult:
				label := "↳ result"
				if p.IsError {
					label = "↳ error"
				}
				body = fmt.Sprintf("%s [%s]\n%s", label, p.ToolCallID, p.Text)
			default:
				body = fmt.Sprintf("[%s] %s", p.Kind, p.Raw)
			}
			for _, line := range strings.Split(safe(body), "\n") {
				fmt.Fprintf(w, "%s%s\n", indent, line)
			}
		}
	}
}

func cmdCheckpoints(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "checkpoints", "RUN [--json]", "Print the run's pair-safe boundaries: every K a fork can keep messages[:K] at\nwithout splitting a tool call from its result.")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	r, msgs, _, err := loadRun(ctx, e, pos[0])
	if err != nil {
		return err
	}
	cps := model.Checkpoints(msgs)
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"run": r.ID, "messages": len(msgs), "checkpoints": cps})
	}
	strs := make([]string, len(cps))
	for i, k := range cps {
		strs[i] = fmt.Sprint(k)
	}
	fmt.Fprintf(e.stdout, "[%s]\n", strings.Join(strs, ", "))
	return nil
}

func cmdExport(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "export", "RUN [--format json|md] [-o FILE]", "Write a run's whole transcript (its inherited prefix included) as JSON or Markdown.")
	format := f.String("format", "json", "output `format`: json or md")
	out := f.String("o", "", "write to `file` instead of standard output")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *format != "json" && *format != "md" {
		return usagef("export: --format must be json or md, not %q", *format)
	}
	r, msgs, inherited, err := loadRun(ctx, e, pos[0])
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if *format == "json" {
		err = writeJSON(&buf, toShowJSON(r, msgs, inherited))
	} else {
		writeMarkdown(&buf, r, msgs, inherited)
	}
	if err != nil {
		return err
	}
	if *out != "" {
		return writeFileAtomic(*out, buf.Bytes())
	}
	_, err = e.stdout.Write(buf.Bytes())
	return err
}

// writeMarkdown renders a run as a Markdown document. Text is made safe for
// terminals, since people cat these files; tool input and output go in
// fences long enough never to be closed by their content.
func writeMarkdown(w io.Writer, r model.Run, msgs []model.Message, inherited int) {
	safe := model.SafeText
	title := model.OneLine(r.Title, 0)
	if title == "" {
		title = "run " + r.ID
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "- run: `%s`%s\n- harness: %s\n- status: %s\n- messages: %d\n", r.ID, nameSuffix(r), r.Harness, r.Status, len(msgs))
	if r.ParentID != "" {
		fmt.Fprintf(w, "- fork of `%s` at K=%d (messages 1-%d inherited)\n", r.ParentID, r.ForkAt, inherited)
	}
	if r.Cwd != "" {
		fmt.Fprintf(w, "- cwd: `%s`\n", safe(r.Cwd))
	}
	if !r.Usage.IsZero() {
		fmt.Fprintf(w, "- own usage: %d input, %d output tokens\n", r.Usage.InputTokens, r.Usage.OutputTokens)
	}
	for i, m := range msgs {
		note := ""
		if i < inherited {
			note = " (inherited)"
		}
		fmt.Fprintf(w, "\n## %d. %s%s\n\n", i+1, m.Role, note)
		for _, p := range m.Parts {
			switch p.Kind {
			case model.Text:
				fmt.Fprintf(w, "%s\n\n", safe(p.Text))
			case model.Thinking:
				fmt.Fprintf(w, "> %s\n\n", strings.ReplaceAll(safe(p.Text), "\n", "\n> "))
			case model.ToolCall:
				fmt.Fprintf(w, "**tool call** `%s` (%s)\n\n%s\n\n", safe(p.ToolName), safe(p.ToolCallID), fence(prettyInput(p.ToolInput), "json"))
			case model.ToolResult:
				label := "tool result"
				if p.IsError {
					label = "tool error"
				}
				fmt.Fprintf(w, "**%s** (%s)\n\n%s\n\n", label, safe(p.ToolCallID), fence(safe(p.Text), ""))
			default:
				fmt.Fprintf(w, "*[%s]*\n\n", p.Kind)
			}
		}
	}
}

func nameSuffix(r model.Run) string {
	if r.Name == "" {
		return ""
	}
	return " (" + model.SafeText(r.Name) + ")"
}

func prettyInput(s string) string {
	var out bytes.Buffer
	if json.Indent(&out, []byte(s), "", "  ") == nil {
		return model.SafeText(out.String())
	}
	return model.SafeText(s)
}

// fence wraps s in a code fence longer than any run of backticks inside it.
func fence(s, lang string) string {
	n, run := 3, 0
	for _, c := range s {
		if c == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f
}
