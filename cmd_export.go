package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"tine/internal/service"
	"tine/model"
)

func cmdExport(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "export", "RUN [--format json|md] [-o FILE]", "Write a run's whole transcript (its inherited prefix included) as JSON or Markdown.")
	format := f.String("format", "json", "output `format`: json or md")
	f.oneOf("format", "json", "md")
	out := f.String("o", "", "write to `file` instead of standard output")
	f.path("o")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	shown, err := readService(st).Show(ctx, pos[0])
	st.Close()
	if err != nil {
		return err
	}
	r, msgs, inherited := shown.Run, shown.Messages, shown.Inherited
	var buf bytes.Buffer
	if *format == "json" {
		err = writeJSON(&buf, service.ToShow(r, msgs, inherited))
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
	// Where it worked: a fork's own worktree (its cwd is the checkout it
	// was made from), else its directory.
	switch {
	case r.Worktree != "":
		fmt.Fprintf(w, "- worked in: `%s`, a git worktree on branch `%s` of `%s`\n", safe(r.Worktree), safe(r.Branch), safe(r.Cwd))
	case r.BaseCommit != "" && !r.InPlace:
		fmt.Fprintf(w, "- worked in: a git worktree of `%s` on branch `%s`, since removed\n", safe(r.Cwd), safe(r.Branch))
	case r.InPlace && r.Cwd != "":
		fmt.Fprintf(w, "- worked in: `%s` itself (in place)\n", safe(r.Cwd))
	case r.Cwd != "":
		fmt.Fprintf(w, "- cwd: `%s`\n", safe(r.Cwd))
	}
	if r.BaseCommit != "" {
		fmt.Fprintf(w, "- base commit: `%s`\n", safe(r.BaseCommit))
	}
	if r.Handoff {
		fmt.Fprintln(w, "- handoff: a new session whose first message was the transcript so far")
	}
	if r.Check != nil {
		fmt.Fprintf(w, "- check: `%s`: %s\n", safe(r.Check.Cmd), strings.TrimSuffix(checkText(r), " ★"))
	}
	if r.Best {
		why := r.BestReason
		if why == "" {
			why = "marked by hand"
		}
		fmt.Fprintf(w, "- best: ★ %s\n", safe(why))
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
