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
	c, err := readService(st).Checkpoints(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, c)
	}
	cps := c.Checkpoints
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
