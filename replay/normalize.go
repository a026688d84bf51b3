package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"tine/harness"
)

// What legitimately changes between a recording and a replay of the same
// run, in one place (the replay section of ARCHITECTURE.md's rule 9):
// what each wire format itself lets change, here, and what each agent's
// requests state of the moment they run in, in the agent's descriptor
// (harness.Recording.Normalize), joined into Rules. Everything else that
// differs is a divergence.
//
// All wire formats:
//   - key order (requests are compared as decoded JSON);
//   - stream and stream_options: whether the answer streams is how it
//     travels, not what the model is asked (the gateway serves the taped
//     answer in the shape asked for);
//   - the working directory an agent states: the replay runs in another
//     worktree, so that path is replaced by "<cwd>" wherever it appears,
//     tool outputs included;
//   - tool-call ids, renamed "<id-1>", "<id-2>", ... in order of appearance.
//
// Anthropic Messages: metadata (user_id: device and session ids) is
// dropped, and cache_control markers wherever they are.
//
// OpenAI Responses: the input items' own ids (msg_<uuid>, fco_<uuid>, ...)
// are dropped, and so are prompt_cache_key (the session id) and
// client_metadata (session, thread, turn and installation ids, turn start
// time, the workspace's commit).
//
// Gemini API: nothing beyond the above (whether it streams and the model
// are in the path; the gateway compares the model there). Tool-call ids
// are functionCall.id and functionResponse.id; a tool's output is a
// part's functionResponse.
type normRules struct {
	cwd     []func() *regexp.Regexp // first group that matched: the working directory
	mangled bool                    // also replace the cwd's mangled form
	text    []textRule              // applied to every string
	drop    []string                // top-level keys dropped
	// dropEverywhere are keys dropped at any depth.
	dropEverywhere []string
	// dropItemIDs drops "id" from each element of this top-level array.
	dropItemIDs string
	// toolOutput are the rules applied to tool outputs only.
	toolOutput []textRule
	// canon are the agents' rewrites of the decoded request.
	canon []func(any)
}

type textRule struct {
	has  string // a literal the match needs: strings without it are skipped
	re   func() *regexp.Regexp
	with string
}

// lazyRE compiles expr when first used: a package's regular expressions
// compiled at start-up would be paid by every tine command, replaying or
// not (a re-import of unchanged files takes ~30 ms in all).
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// wireRules are what each wire format itself lets change.
var wireRules = map[Wire]normRules{
	WireAnthropic: {drop: []string{"metadata", "stream", "stream_options"}, dropEverywhere: []string{"cache_control"}},
	WireResponses: {drop: []string{"prompt_cache_key", "client_metadata", "stream", "stream_options"}, dropItemIDs: "input"},
	WireChat:      {drop: []string{"stream", "stream_options"}},
	WireGemini:    {},
}

// Rules are what a replay lets differ in each wire format's requests, and
// which tools it lets an agent run again: the wire formats' own, with
// those of every agent that speaks one.
type Rules struct {
	norm  map[Wire]normRules
	local map[Wire]map[string]bool
}

// RulesOf are the wire formats' rules with agents' on top: an agent's
// Recording applies to its wire, or to every wire when the wire depends
// on the run (pi's, its provider's). Agents without one add nothing.
func RulesOf(agents []harness.Agent) *Rules {
	r := &Rules{norm: map[Wire]normRules{}, local: map[Wire]map[string]bool{}}
	for w, base := range wireRules {
		r.norm[w] = base
		r.local[w] = map[string]bool{}
	}
	for _, a := range agents {
		rec := a.Record
		if rec == nil {
			continue
		}
		for w := range wireRules {
			if rec.Wire != "" && rec.Wire != w {
				continue
			}
			nr := r.norm[w]
			n := rec.Normalize
			for _, c := range n.Cwd {
				nr.cwd = append(slices.Clip(nr.cwd), lazyRE(c))
			}
			nr.mangled = nr.mangled || n.MangledCwd
			nr.text = appendRewrites(nr.text, n.Text)
			nr.toolOutput = appendRewrites(nr.toolOutput, n.ToolOutput)
			if n.Canonical != nil {
				nr.canon = append(slices.Clip(nr.canon), n.Canonical)
			}
			r.norm[w] = nr
			for _, t := range rec.LocalTools {
				r.local[w][t] = true
			}
		}
	}
	return r
}

func appendRewrites(to []textRule, rs []harness.Rewrite) []textRule {
	to = slices.Clip(to)
	for _, rw := range rs {
		to = append(to, textRule{has: rw.Has, re: lazyRE(rw.Pattern), with: rw.With})
	}
	return to
}

// wireOnly are the wire formats' own rules, for a gateway given none.
var wireOnly = sync.OnceValue(func() *Rules { return RulesOf(nil) })

// Normalize decodes a request body and removes from it what legitimately
// changes between a recording and a replay (see above). The result is a
// tree of map[string]any, []any, string, json.Number, bool and nil.
func (r *Rules) Normalize(wire Wire, body []byte) (any, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, err
	}
	return r.normalizeValue(wire, v)
}

// decodeJSON decodes a request body, numbers as json.Number.
func decodeJSON(body []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("replay: request is not JSON: %w", err)
	}
	return v, nil
}

// normalizeValue is Normalize on a decoded body, which it changes.
func (rs *Rules) normalizeValue(wire Wire, v any) (any, error) {
	r, ok := rs.norm[wire]
	if !ok {
		return nil, fmt.Errorf("replay: unknown wire format %q", wire)
	}
	top, _ := v.(map[string]any)
	if top == nil {
		return v, nil
	}
	for _, k := range r.drop {
		delete(top, k)
	}
	if r.dropItemIDs != "" {
		items, _ := top[r.dropItemIDs].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				delete(m, "id")
			}
		}
	}
	for _, f := range r.canon {
		f(v)
	}
	n := &normalizer{wire: wire, r: r, ids: map[string]string{}}
	n.findCwd(v)
	slices.SortStableFunc(n.cwds, func(a, b string) int { return len(b) - len(a) })
	return n.walk(v, false), nil
}

type normalizer struct {
	wire Wire
	r    normRules
	// cwds are the working directories the request states (and their
	// mangled forms), longest first, so that one that extends another
	// (a worktree named after its parent's) is replaced whole.
	cwds []string
	ids  map[string]string
}

// findCwd takes the working directories the request states.
func (n *normalizer) findCwd(v any) {
	switch t := v.(type) {
	case string:
		for _, re := range n.r.cwd {
			for _, m := range re().FindAllStringSubmatch(t, -1) {
				// The first group that matched.
				c := ""
				for _, g := range m[1:] {
					if c = strings.TrimSpace(g); c != "" {
						break
					}
				}
				if len(c) > 1 && !slices.Contains(n.cwds, c) {
					n.cwds = append(n.cwds, c)
					if n.r.mangled {
						n.cwds = append(n.cwds, mangle(c))
					}
				}
			}
		}
	case map[string]any:
		var buf [16]string
		for _, k := range sortedKeys(t, buf[:]) {
			n.findCwd(t[k])
		}
	case []any:
		for _, e := range t {
			n.findCwd(e)
		}
	}
}

// mangle is a path as a project folder's name (Claude Code's): every
// character that is not an ASCII letter or digit becomes '-'.
func mangle(p string) string {
	b := []byte(p)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

func (n *normalizer) id(s string) string {
	if s == "" {
		return s
	}
	if r, ok := n.ids[s]; ok {
		return r
	}
	r := fmt.Sprintf("<id-%d>", len(n.ids)+1)
	n.ids[s] = r
	return r
}

func (n *normalizer) text(s string, toolOut bool) string {
	for _, c := range n.cwds {
		s = strings.ReplaceAll(s, c, "<cwd>")
	}
	s = rewrite(s, n.r.text)
	if toolOut {
		s = rewrite(s, n.r.toolOutput)
	}
	return s
}

// rewrite applies rules to s in turn.
func rewrite(s string, rules []textRule) string {
	for _, tr := range rules {
		if strings.Contains(s, tr.has) {
			s = tr.re().ReplaceAllString(s, tr.with)
		}
	}
	return s
}

// ToolOutputRewriter rewrites a tool output of agent a as a replay
// compares it (its Normalization.ToolOutput: what the agent states of the
// moment, such as Qwen Code's process group id, made the same); nil when
// a has no such rewrite.
func ToolOutputRewriter(a harness.Agent) func(string) string {
	if a.Record == nil || len(a.Record.Normalize.ToolOutput) == 0 {
		return nil
	}
	rules := appendRewrites(nil, a.Record.Normalize.ToolOutput)
	return func(s string) string { return rewrite(s, rules) }
}

// walk normalises v; toolOut says v is (inside) a tool output.
func (n *normalizer) walk(v any, toolOut bool) any {
	switch t := v.(type) {
	case string:
		return n.text(t, toolOut)
	case []any:
		for i, e := range t {
			t[i] = n.walk(e, toolOut)
		}
		return t
	case map[string]any:
		for _, k := range n.r.dropEverywhere {
			delete(t, k)
		}
		var buf [16]string
		for _, k := range sortedKeys(t, buf[:]) {
			if idKey(n.wire, t, k) {
				if s, ok := t[k].(string); ok {
					t[k] = n.id(s)
					continue
				}
			}
			t[k] = n.walk(t[k], toolOut || isToolOutput(n.wire, t, k))
		}
		return t
	}
	return v
}

// idKey reports whether m[k] is a tool-call id.
func idKey(wire Wire, m map[string]any, k string) bool {
	switch wire {
	case WireAnthropic:
		typ := str(m["type"])
		return (k == "id" && (typ == "tool_use" || typ == "server_tool_use")) || (k == "tool_use_id" && strings.HasSuffix(typ, "tool_result"))
	case WireChat:
		_, isCall := m["function"]
		return (k == "id" && isCall) || k == "tool_call_id"
	case WireResponses:
		return k == "call_id"
	case WireGemini:
		if k != "id" {
			return false
		}
		_, named := m["name"].(string)
		_, args := m["args"]
		_, resp := m["response"]
		return named && (args || resp)
	}
	return false
}

// isToolOutput reports whether m[k] is a tool's output: what a replay
// re-runs for real.
func isToolOutput(wire Wire, m map[string]any, k string) bool {
	switch wire {
	case WireAnthropic:
		return strings.HasSuffix(str(m["type"]), "tool_result") && (k == "content" || k == "is_error")
	case WireChat:
		return str(m["role"]) == "tool" && k == "content"
	case WireResponses:
		return strings.HasSuffix(str(m["type"]), "_call_output") && k == "output"
	case WireGemini:
		return k == "functionResponse"
	}
	return false
}

// sortedKeys is m's keys in order, in buf when they fit (requests hold
// thousands of small objects: this is most of Normalize's allocations).
func sortedKeys(m map[string]any, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
