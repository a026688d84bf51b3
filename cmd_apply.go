package main

import (
	"context"
	"fmt"
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
	out, err := readService(st).Apply(ctx, pos[0], *commit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintln(e.stdout, out.Summary())
	return nil
}
