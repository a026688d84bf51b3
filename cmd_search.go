package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"tine/model"
	"tine/store"
)

// searchJSON is what `search --json` prints; keys may be added, never removed.
type searchJSON struct {
	Query string          `json:"query"`
	Hits  []searchHitJSON `json:"hits"`
	// More says more messages match than --limit shows.
	More bool `json:"more"`
}

type searchHitJSON struct {
	Run   string     `json:"run"`
	Tree  string     `json:"tree"`
	Name  string     `json:"name"`
	Title string     `json:"title"`
	K     int        `json:"k"` // the message's number, as show numbers them
	Role  string     `json:"role"`
	Time  *time.Time `json:"time,omitempty"`
	// Snippet is the message's text around the match, on one line.
	Snippet string `json:"snippet"`
}

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
	query := strings.Join(words, " ")
	if strings.TrimSpace(query) == "" {
		return usagef("search: QUERY is the words to find, and it is empty")
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	// One more than is shown says whether there are more.
	hits, err := st.Search(ctx, query, *limit+1)
	if err != nil {
		return err
	}
	more := len(hits) > *limit
	hits = hits[:min(len(hits), *limit)]
	if *asJSON {
		out := searchJSON{Query: query, Hits: make([]searchHitJSON, len(hits)), More: more}
		for i, h := range hits {
			out.Hits[i] = toSearchHitJSON(h)
		}
		return writeJSON(e.stdout, out)
	}
	if len(hits) == 0 {
		fmt.Fprintf(e.stdout, "No message holds %s.\n", model.OneLine(query, 80))
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tK\tROLE\tTITLE\tMESSAGE")
	for _, h := range hits {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", model.ShortID(h.RunID), model.OneLine(h.Name, 30), h.Seq+1,
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

func toSearchHitJSON(h store.Hit) searchHitJSON {
	j := searchHitJSON{Run: h.RunID, Tree: h.TreeID, Name: h.Name, Title: h.Title, K: h.Seq + 1, Role: h.Role, Snippet: h.Snippet}
	if !h.Time.IsZero() {
		t := h.Time
		j.Time = &t
	}
	return j
}
