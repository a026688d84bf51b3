package anthropic

import (
	"maps"
	"slices"

	"tine/model"
)

// tokens is a token count as a server reports it: any JSON number, or null
// for none. One that is not a count in 0..2^53 (model.ParseTokens) does not
// fail the decoding of everything around it: it is kept as bad, saying why,
// and the usage it belongs to is dropped with a note.
type tokens struct {
	n   int64
	bad string
}

func (t *tokens) UnmarshalJSON(b []byte) error {
	*t = tokens{}
	if string(b) == "null" {
		return nil
	}
	n, err := model.ParseTokens(string(b))
	if err != nil {
		t.bad = err.Error()
		return nil
	}
	t.n = n
	return nil
}

// firstBad is why the first bad count among counts is not one, named by
// its field, "" when every count is sane.
func firstBad(counts map[string]tokens) string {
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if c := counts[name]; c.bad != "" {
			return name + ": " + c.bad
		}
	}
	return ""
}
