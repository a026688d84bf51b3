package harness

import (
	"strings"

	"tine/model"
)

// OneLine makes s safe for a terminal, folds its whitespace to single
// spaces and cuts it to at most n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(model.SafeText(s)), " ")
	if n <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
