package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"tine/harness/fork"
	"tine/model"
	"tine/store"
)

// Listing is every tree and its runs, roots first and forks under their
// parents, subagents under the run that spawned them.
type Listing struct {
	Lines []Line
	// Trees counts the trees (subagents are not trees of their own).
	Trees int
	// Unread, when not nil, says why the replays' statuses and A/A rates
	// are left out: a damaged database's runs are listed all the same.
	Unread error
}

// Line is one run of a listing.
type Line struct {
	Run   model.Run
	Depth int
	// Sub: a subagent, under the run that spawned it.
	Sub    bool
	Replay *model.Replay
	AA     model.AARate
}

// JSON is the listing as ls --json gives it.
func (l Listing) JSON() []Run {
	out := make([]Run, 0, len(l.Lines))
	for _, line := range l.Lines {
		j := ToRun(line.Run)
		if line.Replay != nil {
			j.Replay = ToReplayOf(*line.Replay)
		}
		j.AA = ToAA(line.AA)
		out = append(out, j)
	}
	return out
}

// List lists every tree and its runs; all includes the runs hidden by
// replace_original (else their forks take their place).
func (s *Service) List(ctx context.Context, all bool) (Listing, error) {
	var out Listing
	runs, err := s.Store.Runs(ctx)
	if err != nil {
		return out, err
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
	out.Trees = len(trees)
	var walk func(n *model.Node, depth int, sub bool)
	walk = func(n *model.Node, depth int, sub bool) {
		under := depth + 1
		if all || !n.Run.Hidden {
			out.Lines = append(out.Lines, Line{Run: n.Run, Depth: depth, Sub: sub})
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
	replays, err := s.Store.Replays(ctx, ids)
	var rates map[string]model.AARate
	if err == nil {
		rates, err = s.Store.AARates(ctx, ids)
	}
	switch {
	case errors.Is(err, store.ErrDamaged):
		// The runs were read: they are listed, and what could not be
		// read is said (a damaged index of replays).
		out.Unread = err
	case err != nil:
		return out, err
	}
	for i := range out.Lines {
		id := out.Lines[i].Run.ID
		if r, ok := replays[id]; ok {
			out.Lines[i].Replay = &r
		}
		out.Lines[i].AA = rates[id]
	}
	return out, nil
}

// Shown is a run with its whole transcript.
type Shown struct {
	Run       model.Run
	Messages  []model.Message
	Inherited int // the first Inherited messages are its prefix
	AA        model.AARate
}

// JSON is the run as show --json gives it.
func (s Shown) JSON() Show {
	j := ToShow(s.Run, s.Messages, s.Inherited)
	j.AA = ToAA(s.AA)
	return j
}

// Show reads the run ref names, with its whole transcript.
func (s *Service) Show(ctx context.Context, ref string) (Shown, error) {
	r, err := s.Store.Show(ctx, ref)
	if err != nil {
		return Shown{}, err
	}
	return Shown(r), nil
}

// Checkpoints are where the run ref names can be cut: every K is
// pair-safe (rule 1 in ARCHITECTURE.md), read from the cuts stored with
// its messages, so a long run's cost about what a short one's do.
func (s *Service) Checkpoints(ctx context.Context, ref string) (Checkpoints, error) {
	r, err := s.resolve(ctx, ref)
	if err != nil {
		return Checkpoints{}, err
	}
	b, err := s.Store.Boundaries(ctx, r.ID)
	if err != nil {
		return Checkpoints{}, err
	}
	return Checkpoints{Run: r.ID, Messages: b.Len(), Checkpoints: b.Checkpoints()}, nil
}

// DefaultSearchLimit is how many messages a search shows unless asked.
const DefaultSearchLimit = 50

// SearchRequest asks for the messages whose text holds every word of
// Query (the last as a prefix), newest first, at most Limit (0: the
// default).
type SearchRequest struct {
	Query string
	Limit int
}

// Valid says what is wrong with the request's own values, before any
// store is opened.
func (req SearchRequest) Valid() error {
	if req.Limit < 0 {
		return invalidf("search: --limit is how many messages to show, 1 or more, not %d", req.Limit)
	}
	if strings.TrimSpace(req.Query) == "" {
		return invalidf("search: QUERY is the words to find, and it is empty")
	}
	return nil
}

// Search finds the messages req asks for.
func (s *Service) Search(ctx context.Context, req SearchRequest) (Search, error) {
	if err := req.Valid(); err != nil {
		return Search{}, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	// One more than is shown says whether there are more.
	hits, err := s.Store.Search(ctx, req.Query, limit+1)
	if err != nil {
		return Search{}, err
	}
	out := Search{Query: req.Query, Hits: make([]Hit, 0, min(len(hits), limit)), More: len(hits) > limit}
	for _, h := range hits[:min(len(hits), limit)] {
		out.Hits = append(out.Hits, ToHit(h))
	}
	return out, nil
}

// MaxCompared bounds how many runs one comparison lays side by side.
const MaxCompared = 10

// Compare lays the runs refs name side by side from where they part:
// what each said and did, its steps, spending and time, the files it
// changed and its check; withDiff adds each fork's whole diff.
func (s *Service) Compare(ctx context.Context, refs []string, withDiff bool) (Comparison, error) {
	var c Comparison
	switch {
	case len(refs) == 0:
		return c, invalidf("compare: name two runs or more")
	case len(refs) > MaxCompared:
		return c, invalidf("compare: at most %d runs are compared at once, not %d", MaxCompared, len(refs))
	case len(refs) == 1:
		return c, s.oneToCompare(ctx, refs[0])
	}
	var runs []model.Run
	for _, ref := range refs {
		r, err := s.resolve(ctx, ref)
		if err != nil {
			return c, err
		}
		runs = append(runs, r)
	}
	tree, err := s.Store.TreeRuns(ctx, runs[0].TreeID)
	if err != nil {
		return c, err
	}
	roots := model.BuildTrees(tree)
	var nodes []*model.Node
	for _, r := range runs {
		if r.TreeID != runs[0].TreeID {
			return c, &Error{Code: Refused, Err: fmt.Errorf("%s and %s are in different trees: compare forks of one conversation", r.Label(), runs[0].Label())}
		}
		var n *model.Node
		for _, root := range roots {
			if n = root.Find(r.ID); n != nil {
				break
			}
		}
		nodes = append(nodes, n)
	}
	c.ForkPoint = nodes[0].Run.Len()
	for _, n := range nodes[1:] {
		c.ForkPoint = min(c.ForkPoint, model.SharedPrefix(nodes[0], n))
	}
	for _, r := range runs {
		msgs, _, err := s.Store.Messages(ctx, r.ID)
		if err != nil {
			return c, err
		}
		after := msgs[c.ForkPoint:]
		cr := ComparedRun{ID: r.ID, Name: r.Label(), Status: string(r.Status), Error: r.Error, Usage: r.Usage,
			CostUSD: USD(r.CostUSD), Own: after, Best: r.Best, Why: r.BestReason, Harness: r.Harness, Handoff: r.Handoff,
			Worktree: r.Worktree, Branch: r.Branch, Check: ToCheck(r.Check), Messages: make([]Message, len(after))}
		if fork.HasFiles(r) && r.DiffBase() != "" {
			if cr.Files, err = fork.Files(ctx, r); err != nil {
				cr.FilesErr = model.OneLine(err.Error(), 200)
			}
			if withDiff && err == nil {
				if cr.Diff, _, err = fork.Diff(ctx, r); err != nil {
					cr.FilesErr = model.OneLine(err.Error(), 200)
				}
			}
		}
		if !r.FinishedAt.IsZero() {
			cr.Seconds = r.Took().Round(100 * time.Millisecond).Seconds()
		}
		for i, m := range after {
			if m.Role == model.Assistant {
				cr.Steps++
			}
			cr.Messages[i] = ToMessage(c.ForkPoint+i+1, m, false)
		}
		c.Runs = append(c.Runs, cr)
	}
	return c, nil
}

// oneToCompare is the error of a comparison of one run: which runs it
// could be compared with (its forks, else its siblings), if any.
func (s *Service) oneToCompare(ctx context.Context, ref string) error {
	r, err := s.resolve(ctx, ref)
	if err != nil {
		return err
	}
	runs, err := s.Store.TreeRuns(ctx, r.TreeID)
	if err != nil {
		return err
	}
	var forks, siblings []string
	for _, o := range runs {
		switch {
		case o.Hidden || o.ID == r.ID:
		case o.ParentID == r.ID:
			forks = append(forks, model.OneLine(o.Label(), 40))
		case r.ParentID != "" && o.ParentID == r.ParentID:
			siblings = append(siblings, model.OneLine(o.Label(), 40))
		}
	}
	label := model.SafeText(r.Label())
	switch {
	case len(forks) > 0:
		return invalidf("compare: %s alone has nothing to compare with; give two runs or more, e.g. its forks: tine compare %s %s", label, label, strings.Join(forks[:min(len(forks), 3)], " "))
	case len(siblings) > 0:
		return invalidf("compare: %s alone has nothing to compare with; give two runs or more, e.g. its siblings: tine compare %s %s", label, label, strings.Join(siblings[:min(len(siblings), 3)], " "))
	}
	return invalidf("compare: %s alone has nothing to compare with, and it has no forks yet (tine fork %s makes some)", label, label)
}
