package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"tine/harness/fork"
	"tine/model"
	"tine/store"
)

func cmdApply(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "apply", "FORK [--commit] [--json]",
		"Bring FORK's work (its commits since the fork and its uncommitted changes, as\n"+
			"tine compare --diff shows them) into the checkout it was made from: as uncommitted\n"+
			"changes, or as one commit with --commit. Nothing changes when the checkout has its own\n"+
			"uncommitted changes to a file the fork changed, or when the fork's changes do not apply\n"+
			"cleanly; the reason names the files.")
	commit := f.Bool("commit", false, "apply as one commit naming the fork (and its check)")
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
	run, err := st.Resolve(ctx, pos[0])
	if err != nil {
		return err
	}
	out, err := fork.Apply(ctx, run, *commit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintln(e.stdout, out.Summary())
	return nil
}

// applyBest applies the best of runs (marked by their check) into its
// checkout, saying what it applied on w; an error when none is best.
func applyBest(ctx context.Context, st *store.Store, runs []model.Run, w io.Writer) error {
	for _, r := range runs {
		now, err := st.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		if now.Best {
			a, err := fork.Apply(ctx, now, false)
			if err != nil {
				return fmt.Errorf("--apply-best: %w", err)
			}
			fmt.Fprintln(w, a.Summary())
			return nil
		}
	}
	return errors.New("--apply-best: no fork is marked best (did every check fail?); nothing was applied")
}
