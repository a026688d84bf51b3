// Package merge brings what forks learned home (tine merge, the tree's
// and Compare's M, merge_fork over MCP): it reads each fork's facts (what
// it was asked, where it branched, the files it changed, the commands it
// ran and how they ended, its check, its spending, its final answer) into
// a digest, plain text a person can read and edit, bounded and without
// control sequences, and writes the prompt of the turn that gives a run
// those digests, a best-of-N winner's first. The turn itself is the
// driver's (fork.Driver.NextTurnRun, RunTurns), as any turn is: its
// budget, where it runs and what it spends are its run's. It reads and
// records through Store, which store.Store satisfies.
package merge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"tine/harness/fork"
	"tine/model"
)

// Store is what a merge reads and records; *store.Store satisfies it.
type Store interface {
	Run(ctx context.Context, id string) (model.Run, error)
	Messages(ctx context.Context, runID string) ([]model.Message, int, error)
	// AddMerge records that run runID gets a merge of forks (in the
	// prompt's order) as its next turn, refusing a run mid-turn.
	AddMerge(ctx context.Context, runID string, forks []string) (model.Merge, error)
}

// Plan is a merge asked for: the run that gets it and what each fork
// found, in the order the prompt gives them.
type Plan struct {
	Into  model.Run
	Forks []Facts
	// Note is the person's own words about the forks (--summary).
	Note string
	// Applied names the fork whose files are brought into Into's
	// checkout with the merge (--apply), "" for none.
	Applied string
}

// Prepare checks that forks can be merged into the run into ("" is
// their parent) and reads what each found, a best-of-N winner first. It
// refuses, changing nothing: no fork, a fork given twice, a run that is
// no fork, a fork that never ran or is mid-turn, forks of several parents
// without into, into mid-turn, into one of the forks, or in another tree.
func Prepare(ctx context.Context, st Store, forks []model.Run, into string) (Plan, error) {
	var p Plan
	switch {
	case len(forks) == 0:
		return p, errors.New("name a fork to merge")
	case len(forks) > fork.MaxForks:
		return p, fmt.Errorf("at most %d forks are merged at once, not %d", fork.MaxForks, len(forks))
	}
	seen := map[string]bool{}
	for _, f := range forks {
		label := model.SafeText(f.Label())
		switch {
		case seen[f.ID]:
			return p, fmt.Errorf("%s is named twice", label)
		case f.ParentID == "":
			return p, fmt.Errorf("%s is no fork: it has no parent to bring what it found to", label)
		case midTurn(f):
			return p, fmt.Errorf("%s is %w: merge it when its turn has ended", label, ErrMidTurn)
		case f.Status == model.Pending:
			return p, fmt.Errorf("%s has not run yet: it has found nothing to merge", label)
		}
		seen[f.ID] = true
	}
	if into == "" {
		into = forks[0].ParentID
		for _, f := range forks[1:] {
			if f.ParentID != into {
				return p, fmt.Errorf("%s and %s are forks of different runs: say which run gets the merge with --into",
					model.SafeText(forks[0].Label()), model.SafeText(f.Label()))
			}
		}
	}
	target, err := st.Run(ctx, into)
	if err != nil {
		return p, err
	}
	label := model.SafeText(target.Label())
	switch {
	case seen[target.ID]:
		return p, fmt.Errorf("%s is one of the forks merged: a fork is not merged into itself", label)
	case midTurn(target):
		return p, fmt.Errorf("%s is %w: a merge is a turn of its own, given once this one has ended; wait for it (or stop it: tine cancel %s)",
			label, ErrMidTurn, model.ShortID(target.ID))
	}
	for _, f := range forks {
		if f.TreeID != target.TreeID {
			return p, fmt.Errorf("%s is not in %s's conversation: a fork is merged into a run of its own tree", model.SafeText(f.Label()), label)
		}
	}
	p.Into = target
	for _, f := range forks {
		facts, err := Gather(ctx, st, f)
		if err != nil {
			return p, fmt.Errorf("%s: %w", model.SafeText(f.Label()), err)
		}
		p.Forks = append(p.Forks, facts)
	}
	p.Forks = Order(p.Forks)
	return p, nil
}

// midTurn reports whether tine is driving a turn of r, or has handed it
// one that waits for room.
// ErrMidTurn: a fork to merge, or the run to merge into, is in the middle
// of a turn.
var ErrMidTurn = errors.New("in the middle of a turn")

func midTurn(r model.Run) bool { return r.Status == model.Running || r.Status == model.Queued }

// Order puts a best-of-N winner (a fork marked best) first and says why
// each other fork lost to it; without a winner the forks keep their order.
func Order(forks []Facts) []Facts {
	win := -1
	for i, f := range forks {
		if f.Run.Best {
			win = i
			break
		}
	}
	if win < 0 {
		return forks
	}
	out := make([]Facts, 0, len(forks))
	w := forks[win]
	w.Winner = true
	out = append(out, w)
	for i, f := range forks {
		if i != win {
			f.Lost = lostTo(f.Run, w.Run)
			out = append(out, f)
		}
	}
	return out
}

// lostTo says why fork r lost to the winner w.
func lostTo(r, w model.Run) string {
	name := `"` + model.OneLine(w.Label(), 80) + `"`
	c, wc := r.Check, w.Check
	switch {
	case r.Status == model.Failed:
		return "its turn failed: " + model.OneLine(r.Error, 200)
	case r.Status == model.Cancelled:
		return "it was stopped before it finished"
	case c != nil && c.Ran && c.Number && c.Score != nil && wc != nil && wc.Score != nil && *c.Score != *wc.Score:
		return fmt.Sprintf("its check scored %g, %s's %g", *c.Score, name, *wc.Score)
	case c != nil && c.Ran && !c.Passed():
		return "its check " + checkText(c)
	case c != nil && !c.Ran:
		return "its check did not run"
	case w.BestReason != "":
		return name + " was picked: " + model.OneLine(w.BestReason, 200)
	}
	return name + " was picked as the best by a person"
}

// Prompt is the merge's turn: what the run is given, the person's note,
// and each fork's digest, within MaxPrompt.
func (p Plan) Prompt() string {
	var b strings.Builder
	n := len(p.Forks)
	forks := "forks"
	if n == 1 {
		forks = "fork"
	}
	fmt.Fprintf(&b, "[tine merge] What %d %s of this conversation found.\n", n, forks)
	b.WriteString("Each branched off this conversation and went its own way; you have not seen what it did. ")
	if p.Applied != "" {
		fmt.Fprintf(&b, "The files of %s were brought into your working directory with this merge; no other fork's were.\n", quote(p.Applied))
	} else {
		b.WriteString("None of their files are in your working directory.\n")
	}
	if n > 1 && p.Forks[0].Winner {
		fmt.Fprintf(&b, "%s won; it comes first, then what each other fork tried and why it lost.\n", quote(p.Forks[0].Run.Label()))
	}
	if note := strings.TrimSpace(p.Note); note != "" {
		b.WriteString("\nFrom the person:\n")
		b.WriteString(indent(cut(note, maxNote)))
	}
	room := MaxPrompt - b.Len() - 400
	for i, f := range p.Forks {
		head := fmt.Sprintf("\n### %d of %d", i+1, n)
		switch {
		case f.Winner:
			head += ", the winner"
		case f.Lost != "":
			head += ", lost: " + f.Lost
		}
		b.WriteString(head + "\n")
		b.WriteString(f.Digest(min(MaxDigest, max(room/n, 500))))
	}
	b.WriteString("\nTake what they found into account from here on. Reply briefly: what you take from them, and what you would do next.\n")
	return b.String()
}

// Start gives the merge its run: Into itself, or a new fork at its end
// when Into is a session tine never writes to (fork.Driver.NextTurnRun,
// as tine run does), and records the merge there. The caller runs the
// turn, fork.Turn{RunID: run.ID, Input: prompt}, as any turn is run.
func Start(ctx context.Context, d *fork.Driver, st Store, p Plan) (model.Run, model.Merge, error) {
	// Asked again: the run may have started a turn since Prepare.
	into, err := st.Run(ctx, p.Into.ID)
	if err != nil {
		return model.Run{}, model.Merge{}, err
	}
	if midTurn(into) {
		return model.Run{}, model.Merge{}, fmt.Errorf("%s is %w: merge when its turn has ended", model.SafeText(into.Label()), ErrMidTurn)
	}
	target, err := d.NextTurnRun(ctx, into.ID, "", fork.Where{})
	if err != nil {
		return model.Run{}, model.Merge{}, err
	}
	ids := make([]string, len(p.Forks))
	for i, f := range p.Forks {
		ids[i] = f.Run.ID
	}
	m, err := st.AddMerge(ctx, target.ID, ids)
	if err != nil {
		return model.Run{}, model.Merge{}, err
	}
	return target, m, nil
}

// CanApply says why the plan's fork cannot be applied with it (--apply),
// before anything is done: there must be one fork, and its files must
// come from the checkout of the run that gets the merge.
func (p Plan) CanApply() error {
	if len(p.Forks) != 1 {
		return fmt.Errorf("--apply brings one fork's files home, and %d forks are merged: apply the one you want with tine apply", len(p.Forks))
	}
	f := p.Forks[0].Run
	dir := p.Into.Worktree
	if dir == "" {
		dir = p.Into.Cwd
	}
	if filepath.Clean(f.Cwd) != filepath.Clean(dir) {
		return fmt.Errorf("%s was made from %s, and %s works in %s: apply it where it came from with tine apply %s",
			model.SafeText(f.Label()), model.SafeText(f.Cwd), model.SafeText(p.Into.Label()), model.SafeText(dir), model.ShortID(f.ID))
	}
	return nil
}

// Apply brings the plan's one fork's files into the checkout it came
// from, the one the merge's run works in, as tine apply does: refused,
// changing nothing, when they clash (fork.Apply).
func (p Plan) Apply(ctx context.Context, commit bool) (fork.Applied, error) {
	if err := p.CanApply(); err != nil {
		return fork.Applied{}, err
	}
	return fork.Apply(ctx, p.Forks[0].Run, commit)
}

// SummaryPrompt asks a fork for its own summary (--summarize).
const SummaryPrompt = "[tine merge] What you found here goes back to the conversation this one branched off. " +
	"In at most 200 words of plain text, and without using any tools, say what you tried since it branched, " +
	"what worked, what failed and why, and what you would tell the conversation to do next."

// SummaryTurn is the turn that asks fork run for its summary: on the fork
// itself, or on a new fork at its end when run is a session tine never
// writes to (NextTurnRun). It returns the turn and its run; the summary
// is that run's answer after the length it has now (Summary).
func SummaryTurn(ctx context.Context, d *fork.Driver, run model.Run) (fork.Turn, model.Run, error) {
	target, err := d.NextTurnRun(ctx, run.ID, "", fork.Where{})
	if err != nil {
		return fork.Turn{}, model.Run{}, err
	}
	return fork.Turn{RunID: target.ID, Input: SummaryPrompt}, target, nil
}

// Summary is what run answered in its turns after its first at messages
// (a summary turn), and what they spent; an error when the turn did not
// complete or said nothing.
func Summary(ctx context.Context, st Store, run model.Run, at int) (string, model.Usage, error) {
	label := model.SafeText(run.Label())
	if run.Status != model.Completed {
		why := string(run.Status)
		if run.Error != "" {
			why += ": " + model.OneLine(run.Error, 200)
		}
		return "", model.Usage{}, fmt.Errorf("%s's summary turn did not complete (%s)", label, why)
	}
	msgs, _, err := st.Messages(ctx, run.ID)
	if err != nil {
		return "", model.Usage{}, err
	}
	after := msgs[min(at, len(msgs)):]
	text := strings.TrimSpace(lastAnswer(after))
	if text == "" {
		return "", model.Usage{}, fmt.Errorf("%s's summary turn said nothing", label)
	}
	return text, model.OwnUsage(after, 0), nil
}
