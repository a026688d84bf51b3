package main

import (
	"bufio"
	"context"
	"strconv"
)

func cmdCheckpoints(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "checkpoints", "RUN [--json]", "Print the run's pair-safe boundaries: every K a fork can keep messages[:K] at\nwithout splitting a tool call from its result.")
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
	// The cuts stored with the run's messages (ARCHITECTURE.md, rule 1):
	// a long run's checkpoints cost about what a short one's do.
	b, err := st.Boundaries(ctx, r.ID)
	if err != nil {
		return err
	}
	cps := b.Checkpoints()
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"run": r.ID, "messages": b.Len(), "checkpoints": cps})
	}
	w := bufio.NewWriter(e.stdout)
	var buf []byte
	buf = append(buf, '[')
	for i, k := range cps {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendInt(buf, int64(k), 10)
		if len(buf) > 32<<10 {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	buf = append(buf, "]\n"...)
	w.Write(buf)
	return w.Flush()
}
