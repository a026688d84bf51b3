package merge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
)

// Bounds of the text a merge writes, in bytes: a fork's digest, and the
// whole prompt (every digest shares it: ten forks get a tenth each).
const (
	MaxDigest = 6000
	MaxPrompt = 40000
)

// Shown at most, in a digest: the rest are counted.
const (
	maxCalls  = 20
	maxFiles  = 20
	maxAsked  = 600
	maxAnswer = 3000
	maxNote   = 2000
)

// Facts are what a digest says of one fork, read by Gather.
type Facts struct {
	Run model.Run
	// Parent is what the fork's parent is called; ParentLen its length now.
	Parent    string
	ParentLen int
	// Asked is the first message a person gave the fork; Turns how many
	// it was given.
	Asked string
	Turns int
	// Files are what it changed against the files it started with;
	// FilesNote says why there are none to list ("" when Files says it).
	Files     []worktree.FileStat
	FilesNote string
	// Calls are the tool calls it made (the commands it ran), in order.
	Calls []Call
	// Answer is its final answer: the text of its last answer.
	Answer string
	// Summary is its own summary of what it learned (--summarize), which
	// SummaryRun spent SummarySpent on.
	Summary      string
	SummaryRun   string
	SummarySpent model.Usage
	// Winner: it won a best-of-N merge (it is marked best); Lost says why
	// another fork lost to it.
	Winner bool
	Lost   string
}

// Call is one tool call a fork made and how it ended.
type Call struct {
	Tool string
	// Input is what it was given, on a line: the command, the path.
	Input string
	// Answered: its result came; Failed: it says it failed (an error, or
	// a command's exit status other than 0); Outcome is the result's
	// first lines when it failed.
	Answered, Failed bool
	Outcome          string
}

// Gather reads the facts of fork run for its digest: its own messages,
// its parent, the files it changed (its worktree against the files it
// started with, or, for a fork whose files were elsewhere, its branch).
func Gather(ctx context.Context, st Store, run model.Run) (Facts, error) {
	f := Facts{Run: run}
	msgs, _, err := st.Messages(ctx, run.ID)
	if err != nil {
		return f, err
	}
	own := msgs[min(run.ForkAt, len(msgs)):]
	if run.ParentID != "" {
		parent, err := st.Run(ctx, run.ParentID)
		if err != nil {
			return f, err
		}
		f.Parent, f.ParentLen = parent.Label(), parent.Len()
	}
	for _, m := range own {
		if m.IsPrompt() {
			if f.Turns == 0 {
				f.Asked = m.PlainText()
			}
			f.Turns++
		}
	}
	f.Calls = callsOf(own)
	f.Answer = lastAnswer(own)
	f.Files, f.FilesNote = filesOf(ctx, run)
	return f, nil
}

// lastAnswer is the text of the last answer in msgs that has text.
func lastAnswer(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != model.Assistant {
			continue
		}
		var parts []string
		for _, p := range msgs[i].Parts {
			if p.Kind == model.Text && strings.TrimSpace(p.Text) != "" {
				parts = append(parts, p.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// filesOf is what run changed, or why that cannot be listed.
func filesOf(ctx context.Context, run model.Run) ([]worktree.FileStat, string) {
	var files []worktree.FileStat
	var err error
	switch {
	case run.Worktree != "" && run.DiffBase() != "":
		if _, serr := os.Stat(run.Worktree); serr != nil {
			return nil, "its worktree " + run.Worktree + " is gone"
		}
		files, err = worktree.DiffStat(ctx, run.Worktree, run.DiffBase())
	case !run.OnThisMachine() && run.Branch != "" && run.Cwd != "" && run.DiffBase() != "":
		// Its files were elsewhere; its work came back as its branch.
		files, err = worktree.BetweenStat(ctx, run.Cwd, run.DiffBase(), "refs/heads/"+run.Branch)
	case run.InPlace:
		return nil, "it ran in place, in " + run.Cwd + ": what it changed is among that checkout's own changes"
	case run.BaseCommit != "":
		return nil, "its worktree was removed (tine worktree rm or prune)"
	default:
		return nil, "it has no worktree of its own (no agent turn ran tools on files)"
	}
	if err != nil {
		return nil, "unknown: " + model.OneLine(err.Error(), 200)
	}
	if len(files) == 0 {
		return nil, "none"
	}
	return files, ""
}

// exitCode finds the exit status a command's output reports, as the
// agents write it: Claude Code "Exit code 1", Codex "Process exited with
// code 1", pi "Command exited with code 1", or JSON's "exit_code": 1.
var exitCode = regexp.MustCompile(`(?i)(?:\bexit(?:ed with)? code:? ?|"exit_?code":\s*)(-?\d+)`)

// callsOf are the tool calls of msgs, each with how its result ended.
func callsOf(msgs []model.Message) []Call {
	var calls []Call
	at := map[string]int{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case model.ToolCall:
				at[p.ToolCallID] = len(calls)
				calls = append(calls, Call{Tool: p.ToolName, Input: inputLine(p.ToolInput)})
			case model.ToolResult:
				i, ok := at[p.ToolCallID]
				if !ok || calls[i].Answered {
					continue
				}
				c := &calls[i]
				c.Answered, c.Failed = true, p.IsError
				code := 0
				if m := exitCode.FindStringSubmatch(p.Text); m != nil {
					code, _ = strconv.Atoi(m[1])
				}
				switch {
				case code != 0:
					c.Failed, c.Outcome = true, fmt.Sprintf("exit %d", code)
					if out := outputOf(p.Text); out != "" {
						c.Outcome += ": " + out
					}
				case c.Failed:
					c.Outcome = outputOf(p.Text)
				}
			}
		}
	}
	return calls
}

// inputLine is a tool call's input on a line: the command it runs, else
// the file or what it looks for, else its JSON.
func inputLine(input string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(input), &obj) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "path", "filePath", "pattern", "query", "url", "description"} {
			switch v := obj[k].(type) {
			case string:
				if v != "" {
					return model.OneLine(v, 160)
				}
			case []any:
				var words []string
				for _, w := range v {
					words = append(words, fmt.Sprint(w))
				}
				if len(words) > 0 {
					return model.OneLine(strings.Join(words, " "), 160)
				}
			}
		}
	}
	return model.OneLine(input, 120)
}

// outputOf is the first two lines of a tool's output that say
// something, on one line: after Codex's "Output:" line when it has one,
// and never the line that gives the exit status.
func outputOf(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "Output:" {
			lines = lines[i+1:]
			break
		}
	}
	var keep []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" || exitCode.MatchString(l) {
			continue
		}
		if keep = append(keep, l); len(keep) == 2 {
			break
		}
	}
	return model.OneLine(strings.Join(keep, " / "), 160)
}

// Digest is f as a person reads it (and edits it, before it is sent):
// plain text, no control sequences, at most limit bytes; its lines are a
// list, which reads the same where it is shown as markdown.
func (f Facts) Digest(limit int) string {
	var b strings.Builder
	r := f.Run
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	status := string(r.Status)
	if r.Error != "" {
		status += ": " + model.OneLine(r.Error, 300)
	}
	line("Fork %s (%s, %s): %s", quote(r.Label()), model.SafeText(r.Harness), model.ShortID(r.ID), status)
	if f.Asked != "" {
		line("- Asked:")
		b.WriteString(indent(cut(f.Asked, maxAsked)))
	}
	branched := fmt.Sprintf("after message %d of %s", r.ForkAt, quote(f.Parent))
	if r.ForkStep > 0 {
		branched += fmt.Sprintf(" (its step %d)", r.ForkStep)
	}
	if f.ParentLen != r.ForkAt {
		branched += fmt.Sprintf(", which has %d messages now", f.ParentLen)
	}
	if r.Handoff {
		branched += "; a handoff: " + model.SafeText(r.Harness) + " was given the conversation so far as a transcript"
	}
	line("- Branched: %s", branched)
	turns := fmt.Sprintf("%d turn", f.Turns)
	if f.Turns != 1 {
		turns += "s"
	}
	if d := r.Took().Round(100 * time.Millisecond); d > 0 {
		turns += ", in " + d.String()
	}
	line("- Turns: %s", turns)
	f.writeFiles(&b)
	f.writeCalls(&b)
	if c := r.Check; c != nil {
		line("- Check: %s: %s", model.OneLine(c.Cmd, 120), checkText(c))
	}
	spent := model.Grouped(r.Usage.Total()) + " tokens"
	if r.CostUSD > 0 {
		spent += ", " + model.USD(r.CostUSD)
	}
	if !r.Budget.IsZero() {
		spent += "; its budget: " + r.Budget.Describe()
	}
	line("- Spent: %s", spent)
	if f.Summary != "" {
		by := "it"
		if f.SummaryRun != "" && f.SummaryRun != r.Label() {
			by = quote(f.SummaryRun) + ", a fork at its end"
		}
		line("- Its own summary (asked by tine merge; %s spent %s tokens on it):", by, model.Grouped(f.SummarySpent.Total()))
		b.WriteString(indent(cut(f.Summary, maxNote)))
	}
	if f.Answer != "" {
		line("- Final answer:")
		b.WriteString(indent(cut(f.Answer, maxAnswer)))
	} else {
		line("- Final answer: none")
	}
	return cut(b.String(), limit)
}

// writeFiles lists the files f's fork changed: a diffstat.
func (f Facts) writeFiles(b *strings.Builder) {
	if len(f.Files) == 0 {
		fmt.Fprintf(b, "- Files changed: %s\n", model.OneLine(f.FilesNote, 300))
		return
	}
	add, del := 0, 0
	for _, fs := range f.Files {
		add += fs.Added
		del += fs.Deleted
	}
	noun := "files"
	if len(f.Files) == 1 {
		noun = "file"
	}
	fmt.Fprintf(b, "- Files changed: %d %s, +%d -%d\n", len(f.Files), noun, add, del)
	for i, fs := range f.Files {
		if i == maxFiles {
			fmt.Fprintf(b, "  - … and %d more\n", len(f.Files)-maxFiles)
			break
		}
		name := model.OneLine(fs.Path, 160)
		if fs.From != "" {
			name = model.OneLine(fs.From, 80) + " → " + name
		}
		if fs.Binary {
			fmt.Fprintf(b, "  - %s (binary)\n", name)
		} else {
			fmt.Fprintf(b, "  - %s +%d -%d\n", name, fs.Added, fs.Deleted)
		}
	}
}

// writeCalls lists the commands f's fork ran and how each ended: the
// last maxCalls, the rest counted.
func (f Facts) writeCalls(b *strings.Builder) {
	if len(f.Calls) == 0 {
		b.WriteString("- Commands: none\n")
		return
	}
	failed := 0
	for _, c := range f.Calls {
		if c.Failed {
			failed++
		}
	}
	noun := "tool calls"
	if len(f.Calls) == 1 {
		noun = "tool call"
	}
	fmt.Fprintf(b, "- Commands: %d %s, %d failed", len(f.Calls), noun, failed)
	calls := f.Calls
	if len(calls) > maxCalls {
		fmt.Fprintf(b, " (the last %d:)", maxCalls)
		calls = calls[len(calls)-maxCalls:]
	}
	b.WriteString("\n")
	for _, c := range calls {
		end := "ok"
		switch {
		case !c.Answered:
			end = "no result"
		case c.Failed:
			end = "failed"
		}
		fmt.Fprintf(b, "  - %-9s %s: %s", end, model.OneLine(c.Tool, 40), c.Input)
		if c.Outcome != "" {
			fmt.Fprintf(b, " → %s", c.Outcome)
		}
		b.WriteString("\n")
	}
}

// checkText is how a check ended, in words.
func checkText(c *model.Check) string { return model.OneLine(fork.CheckResult(c), 200) }

// quote is a name as a digest writes it: safe, on a line, in quotes.
func quote(s string) string { return `"` + model.OneLine(s, 80) + `"` }

// indent is text made safe, every line indented by two spaces, ending
// with a newline.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(model.SafeText(s), "\n "), "\n")
	for i, l := range lines {
		lines[i] = "  " + strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// cut is s in at most n bytes (never inside a character), saying that it
// was cut.
func cut(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	const more = " … (cut)\n"
	end := max(n-len(more), 0)
	for end > 0 && !utf8Start(s[end]) {
		end--
	}
	return s[:end] + more
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }
