package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/charmbracelet/x/term"
)

// writeJSON prints v indented. encoding/json escapes C0 controls; C1
// controls (U+0080-U+009F), which some terminals obey, are escaped here too.
func writeJSON(w io.Writer, v any) error { return encodeJSON(w, v, "  ") }

// writeJSONLine prints v as one line of JSON (a stream of them: tine
// import --watch --json), escaped as writeJSON escapes.
func writeJSONLine(w io.Writer, v any) error { return encodeJSON(w, v, "") }

func encodeJSON(w io.Writer, v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeC1(buf.Bytes()))
	return err
}

// usd is money in the JSON tine prints (ls, show, export, fork, run,
// compare): rounded to a billionth of a dollar. A run's cost is a sum of
// prices in binary floating point (0.1 + 0.2 is 0.30000000000000004);
// a billionth is below what one token costs at any price tine knows and
// far above that sum's error for any cost under millions of dollars, so
// that prints 0.3.
type usd float64

// MarshalJSON writes u rounded to a billionth of a dollar.
func (u usd) MarshalJSON() ([]byte, error) {
	return json.Marshal(math.Round(float64(u)*1e9) / 1e9)
}

func escapeC1(b []byte) []byte {
	if !bytes.Contains(b, []byte{0xc2}) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f {
			out = fmt.Appendf(out, `\u%04x`, b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}

// plural says "1 run", "2 runs": a count with its noun.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// cells is how many characters a column cut at n may take on w: n on a
// terminal, where a table's line must fit; all of it elsewhere (a pipe, a
// file), where a cut would lose what a script reads (0 is no cut).
func cells(w io.Writer, n int) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(f.Fd()) {
		return n
	}
	return 0
}
