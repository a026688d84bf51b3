package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"tine/model"
)

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
	shown, err := readService(st).Show(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, shown.JSON())
	}
	writeShow(e.stdout, shown.Run, shown.Messages, shown.Inherited)
	if a := shown.AA; a.Measured > 0 {
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
