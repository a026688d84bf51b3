package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"tine/model"
)

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
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.Resolve(ctx, pos[0])
	if err != nil {
		return err
	}
	msgs, inherited, err := st.Messages(ctx, r.ID)
	if err != nil {
		return err
	}
	rates, err := st.AARates(ctx, []string{r.ID})
	if err != nil {
		return err
	}
	if *asJSON {
		s := toShowJSON(r, msgs, inherited)
		s.AA = toAAJSON(rates[r.ID])
		return writeJSON(e.stdout, s)
	}
	writeShow(e.stdout, r, msgs, inherited)
	if a, ok := rates[r.ID]; ok {
		fmt.Fprintf(e.stdout, "A/A: %s\n", a)
	}
	return nil
}

// writeShow prints a run for people; all transcript text is made safe.
func writeShow(w io.Writer, r model.Run, msgs []model.Message, inherited int) {
	safe := model.SafeText
	fmt.Fprintf(w, "run %s", r.ID)
	if r.Name != "" {
		fmt.Fprintf(w, " (%s)", safe(r.Name))
	}
	fmt.Fprintf(w, " · %s · %s · %s\n", r.Harness, r.Status, plural(len(msgs), "message"))
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
	if !r.Budget.IsZero() {
		fmt.Fprintf(w, "budget  at most %s of its own\n", r.Budget.Describe())
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
