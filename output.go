package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
