package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

// Kind classifies a divergence (rule 9 in ARCHITECTURE.md).
type Kind string

const (
	// KindModel: the request differs outside tool outputs (the prompt, the
	// model, a setting, the tools offered, the conversation's shape).
	KindModel Kind = "model"
	// KindTool: a tool output differs (the world the tools ran in changed).
	KindTool Kind = "tool"
	// KindNetwork: a tool output differs and shows a network error (replays
	// run without network by design).
	KindNetwork Kind = "network"
	// KindTree: the requests match but the working tree the tools left
	// differs from the one recorded (an edit whose result differs).
	KindTree Kind = "tree"
)

// Mismatch is the first difference between a taped request and the one a
// replay sent, after normalisation.
type Mismatch struct {
	Kind Kind `json:"kind"`
	// Path is the differing field, e.g. "messages[5].content[0].content";
	// "" when a whole request differs (not JSON).
	Path string `json:"path"`
	// Fields lists every differing field (at most maxFields), the first
	// of them Path's kind first: differences outside tool outputs come
	// before those inside.
	Fields []string `json:"fields"`
	// Taped and Actual are the field's normalised values: a string as is,
	// anything else as indented JSON ("" when the field is missing).
	Taped  string `json:"taped"`
	Actual string `json:"actual"`
	// Diff is a unified diff of Taped against Actual.
	Diff string `json:"diff"`
	// Note, when set, says in a sentence what differs where a field's
	// path cannot (a tool a replay will not run, the working tree).
	Note string `json:"note,omitempty"`
}

// String is one line: the kind, the field and the first changed line (for
// a network divergence, the line with the network error).
func (m *Mismatch) String() string {
	if m == nil {
		return "no divergence"
	}
	if m.Note != "" {
		return fmt.Sprintf("%s: %s", m.Kind, m.Note)
	}
	what := m.Path
	if what == "" {
		what = "the request"
	}
	s := fmt.Sprintf("%s: %s differs", m.Kind, what)
	for _, l := range strings.Split(m.Diff, "\n") {
		if m.Kind == KindNetwork && !(strings.HasPrefix(l, "+") && networkError().MatchString(l)) {
			continue // the line that shows the network error
		}
		if (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
			if len(l) > 120 {
				l = l[:120] + "…"
			}
			s += " (" + l + ")"
			break
		}
	}
	return s
}

const maxFields = 20

// networkError matches what tools print when the network is not there.
var networkError = lazyRE(`(?i)could not resolve (host|hostname)|temporary failure in name resolution|name or service not known|no address associated with hostname|connection refused|network is unreachable|no route to host|connection timed out|getaddrinfo|ENOTFOUND|ECONNREFUSED|ECONNRESET|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|failed to connect to|unable to access '[^']*'|dial tcp|i/o timeout|TLS handshake timeout|server misbehaving`)

// Compare checks a replayed request against the taped one: nil when they
// are the same after Normalize, else the first difference, classified.
// A difference outside tool outputs is KindModel whatever else differs;
// otherwise the first differing tool output is KindTool, or KindNetwork
// when the actual output shows a network error the taped one did not.
func (r *Rules) Compare(wire Wire, taped, actual []byte) *Mismatch {
	tv, terr := r.Normalize(wire, taped)
	av, aerr := r.Normalize(wire, actual)
	return compareValues(wire, tv, terr, av, aerr, taped, actual)
}

// compareValues is Compare with both requests normalised (a replay
// normalises each taped step once)
// too (the gateway decodes each request once).
func compareValues(wire Wire, tv any, terr error, av any, aerr error, taped, actual []byte) *Mismatch {
	if terr != nil || aerr != nil {
		if bytes.Equal(taped, actual) {
			return nil
		}
		return &Mismatch{Kind: KindModel, Taped: string(taped), Actual: string(actual),
			Diff: unifiedDiff(string(taped), string(actual))}
	}
	c := &comparer{wire: wire}
	c.walk("", tv, av, false)
	if len(c.model) == 0 && len(c.tool) == 0 {
		return nil
	}
	var first diffAt
	kind := KindModel
	if len(c.model) > 0 {
		first = c.model[0]
	} else {
		first = c.tool[0]
		kind = KindTool
		if a, t := render(first.b), render(first.a); networkError().MatchString(a) && !networkError().MatchString(t) {
			kind = KindNetwork
		}
	}
	m := &Mismatch{Kind: kind, Path: first.path, Taped: render(first.a), Actual: render(first.b)}
	for _, d := range append(c.model, c.tool...) {
		if len(m.Fields) == maxFields {
			break
		}
		m.Fields = append(m.Fields, d.path)
	}
	m.Diff = unifiedDiff(m.Taped, m.Actual)
	return m
}

type diffAt struct {
	path string
	a, b any // missing: absent{}
}

type absent struct{}

type comparer struct {
	wire        Wire
	model, tool []diffAt
}

func (c *comparer) add(path string, a, b any, toolOut bool) {
	d := diffAt{path, a, b}
	if toolOut {
		c.tool = append(c.tool, d)
	} else {
		c.model = append(c.model, d)
	}
}

func (c *comparer) walk(path string, a, b any, toolOut bool) {
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok {
			c.add(path, a, b, toolOut)
			return
		}
		var abuf, bbuf [16]string
		keys := sortedKeys(at, abuf[:])
		for _, k := range sortedKeys(bt, bbuf[:]) {
			if _, ok := at[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, aok := at[k]
			bv, bok := bt[k]
			to := toolOut || isToolOutput(c.wire, at, k) || isToolOutput(c.wire, bt, k)
			switch {
			case !aok:
				c.add(p, absent{}, bv, to)
			case !bok:
				c.add(p, av, absent{}, to)
			default:
				c.walk(p, av, bv, to)
			}
		}
	case []any:
		bt, ok := b.([]any)
		if !ok {
			c.add(path, a, b, toolOut)
			return
		}
		n := max(len(at), len(bt))
		for i := range n {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(at):
				c.add(p, absent{}, bt[i], toolOut)
			case i >= len(bt):
				c.add(p, at[i], absent{}, toolOut)
			default:
				c.walk(p, at[i], bt[i], toolOut)
			}
		}
	default:
		if !scalarEqual(a, b) {
			c.add(path, a, b, toolOut)
		}
	}
}

func scalarEqual(a, b any) bool {
	switch at := a.(type) {
	case json.Number:
		bt, ok := b.(json.Number)
		return ok && at == bt
	case string:
		bt, ok := b.(string)
		return ok && at == bt
	case bool:
		bt, ok := b.(bool)
		return ok && at == bt
	case nil:
		return b == nil
	}
	return false
}

// render shows a value for a diff: a string as is, the rest as JSON.
func render(v any) string {
	switch t := v.(type) {
	case absent:
		return ""
	case string:
		return t
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// unifiedDiff is a line diff of a against b in unified format with three
// lines of context, headed "--- taped" / "+++ actual" ("" when their
// lines are the same). The values compared rarely end with a newline;
// then each gets one, so that "\ No newline at end of file" is said only
// where exactly one of them ends with a newline.
func unifiedDiff(a, b string) string {
	if !strings.HasSuffix(a, "\n") && !strings.HasSuffix(b, "\n") {
		if a != "" {
			a += "\n"
		}
		if b != "" {
			b += "\n"
		}
	}
	return udiff.Unified("taped", "actual", a, b)
}
