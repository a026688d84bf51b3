package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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
// lines of context, headed "--- taped" / "+++ actual".
func unifiedDiff(a, b string) string {
	al, bl := splitLines(a), splitLines(b)
	// Common prefix and suffix first, so the quadratic part is the middle.
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	am, bm := al[pre:len(al)-suf], bl[pre:len(bl)-suf]
	type op struct {
		kind byte // ' ', '-', '+'
		text string
	}
	var ops []op
	for _, l := range al[:pre] {
		ops = append(ops, op{' ', l})
	}
	if len(am)*len(bm) > 4_000_000 {
		for _, l := range am {
			ops = append(ops, op{'-', l})
		}
		for _, l := range bm {
			ops = append(ops, op{'+', l})
		}
	} else {
		// Longest common subsequence, by table.
		n, m := len(am), len(bm)
		t := make([][]int32, n+1)
		for i := range t {
			t[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if am[i] == bm[j] {
					t[i][j] = t[i+1][j+1] + 1
				} else {
					t[i][j] = max(t[i+1][j], t[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && am[i] == bm[j]:
				ops = append(ops, op{' ', am[i]})
				i, j = i+1, j+1
			case i < n && (j == m || t[i+1][j] >= t[i][j+1]):
				ops = append(ops, op{'-', am[i]})
				i++
			default:
				ops = append(ops, op{'+', bm[j]})
				j++
			}
		}
	}
	for _, l := range al[len(al)-suf:] {
		ops = append(ops, op{' ', l})
	}
	// Hunks with three lines of context.
	const ctx = 3
	var out strings.Builder
	out.WriteString("--- taped\n+++ actual\n")
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(len(ops), end+ctx)
				break
			}
			end = run
		}
		aStart, bStart := 1, 1
		for _, o := range ops[:start] {
			if o.kind != '+' {
				aStart++
			}
			if o.kind != '-' {
				bStart++
			}
		}
		aLen, bLen := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				aLen++
			}
			if o.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aStart, aLen, bStart, bLen)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
