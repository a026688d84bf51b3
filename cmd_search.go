package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"tine/internal/service"
	"tine/model"
)

type searchJSON = service.Search

func cmdSearch(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "search", "QUERY... [--limit N] [--json]",
		"Find the messages whose text holds every word of QUERY (the last word as a prefix),\n"+
			"newest first: the search the TUI's library runs (s).")
	limit := f.Int("limit", 50, "show at most `N` messages")
	asJSON := f.Bool("json", false, "print JSON")
	words, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("search: --limit is how many messages to show, 1 or more, not %d", *limit)
	}
	req := service.SearchRequest{Query: strings.Join(words, " "), Limit: *limit}
	if err := req.Valid(); err != nil {
		return cliError(err)
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	out, err := readService(st).Search(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	query, hits, more := out.Query, out.Hits, out.More
	if len(hits) == 0 {
		fmt.Fprintf(e.stdout, "No message holds %s.\n", model.OneLine(query, 80))
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tK\tROLE\tTITLE\tMESSAGE")
	for _, h := range hits {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", model.ShortID(h.Run), model.OneLine(h.Name, 30), h.K,
			h.Role, model.OneLine(h.Title, 40), model.OneLine(h.Snippet, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(e.stdout, "More messages match: --limit %d shows more.\n", *limit*2)
	}
	return nil
}
