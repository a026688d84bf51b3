package apihttp

import (
	"maps"
	"slices"

	"tine/model"
)

// Tokens is a token count as a server reports it: any JSON number, or null
// for none. One that is not a count in 0..2^53 (model.ParseTokens) does not
// fail the decoding of everything around it: it is kept as bad, saying why,
// and the usage it belongs to is dropped with a note.
type Tokens struct {
	N   int64
	Bad string
}

func (t *Tokens) UnmarshalJSON(b []byte) error {
	*t = Tokens{}
	if string(b) == "null" {
		return nil
	}
	n, err := model.ParseTokens(string(b))
	if err != nil {
		t.Bad = err.Error()
		return nil
	}
	t.N = n
	return nil
}

// FirstBad is why the first bad count among counts is not one, named by
// its field, "" when every count is sane.
func FirstBad(counts map[string]Tokens) string {
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if c := counts[name]; c.Bad != "" {
			return name + ": " + c.Bad
		}
	}
	return ""
}
