package replay

import (
	"fmt"
	"strings"
	"testing"

	"tine/harness/registry"
)

// TestCompareNormalises: what legitimately changes between a recording and
// a replay of the same run is no divergence, for every CLI's real requests.
func TestCompareNormalises(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) {
			for k, fx := range c.main {
				taped := []byte(fx.Body)
				cases := map[string][]byte{
					"same":      taped,
					"key order": reorder(t, taped),
					"date":      replace(t, taped, c.date, "2027-02-14"),
				}
				cwd := replace(t, taped, c.cwd, "/work/wt/fork-1")
				if c.wire == WireAnthropic {
					cwd = replace(t, cwd, mangle(c.cwd), mangle("/work/wt/fork-1"))
				}
				cases["cwd"] = cwd
				all := cwd
				all = replace(t, all, c.date, "2027-02-14")
				for _, v := range c.volatile {
					if strings.Contains(string(all), v[0]) {
						cases["volatile "+v[0]] = replace(t, taped, v[0], v[1])
						all = replace(t, all, v[0], v[1])
					}
				}
				cases["all at once, reordered"] = reorder(t, all)
				for name, actual := range cases {
					if m := testRules.Compare(c.wire, taped, actual); m != nil {
						t.Errorf("request %d, %s: diverged: %s\n%s", k+1, name, m, m.Diff)
					}
				}
			}
		})
	}
}

// TestCompareVolatileIsReal: each stand-in above does change the request
// before normalisation (else the test above would prove nothing).
func TestCompareVolatileIsReal(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		used := map[string]bool{}
		for _, fx := range c.main {
			for _, v := range c.volatile {
				if strings.Contains(string(fx.Body), v[0]) {
					used[v[0]] = true
				}
			}
		}
		for _, v := range c.volatile {
			if !used[v[0]] {
				t.Errorf("%s: %q appears in none of the requests", c.name, v[0])
			}
		}
	}
}

// TestCompareClassifies: the first difference, with its kind and field.
func TestCompareClassifies(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) {
			last := []byte(c.main[2].Body)
			first := []byte(c.main[0].Body)
			toolPath := map[Wire]string{
				WireAnthropic: "messages[5].content[0].content",
				WireResponses: "input[9].output",
				WireChat:      "messages[5].content",
				WireGemini:    "contents[4].parts[0].functionResponse",
			}[c.wire]
			cases := []struct {
				name   string
				taped  []byte
				actual []byte
				kind   Kind
				path   string // prefix of Mismatch.Path
				diff   string // in Mismatch.Diff
			}{
				{"tool output", last, replace(t, last, c.toolOut, c.toolOut+`\nscratch.txt`), KindTool, toolPath, "+scratch.txt"},
				{"tool output, network", last, replace(t, last, c.toolOut, `curl: (6) Could not resolve host: example.com`), KindNetwork, toolPath, "+curl: (6) Could not resolve host"},
				{"tool output, refused", last, replace(t, last, c.toolOut, `dial tcp 10.0.0.1:443: connect: connection refused`), KindNetwork, toolPath, "connection refused"},
				{"tool output, dns", last, replace(t, last, c.toolOut, `ping: example.com: Temporary failure in name resolution`), KindNetwork, toolPath, "name resolution"},
				{"system prompt", first, replace(t, first, c.system, "You are a different agent."), KindModel, "", "+You are a different agent."},
				{"model", first, replace(t, first, c.setting[0], c.setting[1]), KindModel, c.setting[2], "+"},
				{"model and tool output: model first", last, replace(t, replace(t, last, c.setting[0], c.setting[1]), c.toolOut, "changed"), KindModel, c.setting[2], ""},
				{"a message more", last, []byte(strings.Replace(string(first), `"model":"`, `"model":"`, 1)), KindModel, "", ""},
			}
			for _, tc := range cases {
				m := testRules.Compare(c.wire, tc.taped, tc.actual)
				if m == nil {
					t.Errorf("%s: no divergence", tc.name)
					continue
				}
				if m.Kind != tc.kind || !strings.HasPrefix(m.Path, tc.path) || !inDiff(m.Diff, tc.diff) {
					t.Errorf("%s: got %s at %q, diff:\n%s\nwant %s at %q with %q", tc.name, m.Kind, m.Path, m.Diff, tc.kind, tc.path, tc.diff)
				}
				if tc.kind == KindNetwork && !strings.Contains(m.String(), tc.diff[1:]) {
					t.Errorf("%s: %q does not show the network error", tc.name, m.String())
				}
				if len(m.Fields) == 0 || m.Fields[0] != m.Path {
					t.Errorf("%s: fields %v do not start with %q", tc.name, m.Fields, m.Path)
				}
			}
		})
	}
}

// inDiff reports whether diff has a line that holds want, or, for want
// "+text", an added line that holds text (an agent's tool output may put
// a header before the line the tool printed: Gemini CLI's "Output: ").
func inDiff(diff, want string) bool {
	if s, ok := strings.CutPrefix(want, "+"); ok && s != "" {
		for _, l := range strings.Split(diff, "\n") {
			if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") && strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	return strings.Contains(diff, want)
}

// A network error already in the taped output is no network divergence.
func TestCompareNetworkOnlyWhenNew(t *testing.T) {
	c := &clis[2]
	loadCLI(t, c)
	last := []byte(c.main[2].Body)
	taped := replace(t, last, c.toolOut, `curl: (6) Could not resolve host: a`)
	actual := replace(t, last, c.toolOut, `curl: (6) Could not resolve host: b`)
	if m := testRules.Compare(c.wire, taped, actual); m == nil || m.Kind != KindTool {
		t.Fatalf("got %v, want tool", m)
	}
}

// TestClaudeTokensLeftNote: Claude Code 2.1.328 on claude-sonnet-4-5
// appends a total_tokens_reminder note to each tool result it sends (seen
// against the scripted server: `"content":"hi\n\n<system-reminder>\n
// <total_tokens>14999890 tokens left</total_tokens>\n</system-reminder>"`),
// which its transcript's tool result does not hold: a run that reproduces
// is no divergence, replayed from its transcript or from a tape whose
// count differs. Any other text there still is one.
func TestClaudeTokensLeftNote(t *testing.T) {
	c := &clis[0]
	loadCLI(t, c)
	t.Parallel()
	const note = `\n\n<system-reminder>\n<total_tokens>14999890 tokens left</total_tokens>\n</system-reminder>`
	body := replace(t, c.main[2].Body, `"`+c.toolOut+`"`, `"`+c.toolOut+note+`"`)
	transcript := map[string]string{"toolu_tine0002_0": "hi\nREADME.md\nnotes.txt"}
	if m := testRules.compareOutputs(c.wire, transcript, body, nil); m != nil {
		t.Errorf("the transcript's output against the same output with the note: %s\n%s", m, m.Diff)
	}
	if m := testRules.Compare(c.wire, body, replace(t, body, "14999890", "14998123")); m != nil {
		t.Errorf("a taped request against one whose count differs: %s\n%s", m, m.Diff)
	}
	for _, other := range []string{
		`\n\n<system-reminder>\n<total_tokens>14999890 tokens used</total_tokens>\n</system-reminder>`,
		`\n\n<system-reminder>\nThe user changed notes.txt.\n</system-reminder>`,
		note + `\nmore output`,
	} {
		actual := replace(t, c.main[2].Body, `"`+c.toolOut+`"`, `"`+c.toolOut+other+`"`)
		if m := testRules.compareOutputs(c.wire, transcript, actual, nil); m == nil || m.Kind != KindTool {
			t.Errorf("%s after the output: got %v, want a tool divergence", other, m)
		}
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten"
	b := "one\ntwo\nthree\nFOUR\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve"
	a += "\n11\n12\n13\n14\n15\n16\n17\n18\nlast"
	b += "\n11\n12\n13\n14\n15\n16\n17\n18\nLAST"
	// Changes 6 lines apart share a hunk (as in diff -u); 8 apart do not.
	want := "--- taped\n+++ actual\n@@ -1,13 +1,15 @@\n one\n two\n three\n-four\n+FOUR\n five\n six\n seven\n" +
		" eight\n nine\n ten\n+eleven\n+twelve\n 11\n 12\n 13\n" +
		"@@ -16,4 +18,4 @@\n 16\n 17\n 18\n-last\n+LAST\n"
	if got := unifiedDiff(a, b); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// testRules are the rules of every backend tine is built with, as main
// gives them to its gateway.
var testRules = RulesOf(registry.Agents())

// bigPair is n numbered lines, and the same with the first and the last
// changed: what no common prefix or suffix narrows down (a tool's long
// output whose first and last lines hold a date).
func bigPair(n int) (a, b string) {
	var x, y strings.Builder
	for i := range n {
		line := fmt.Sprintf("line %d of a long tool output\n", i)
		x.WriteString(line)
		if i == 0 || i == n-1 {
			line = fmt.Sprintf("LINE %d, changed\n", i)
		}
		y.WriteString(line)
	}
	return x.String(), y.String()
}

// Big inputs get the same line diff as small ones: each changed line once,
// in a hunk of its own, not every line of the middle removed and added.
func TestUnifiedDiffOfBigInputs(t *testing.T) {
	a, b := bigPair(5000)
	want := "--- taped\n+++ actual\n" +
		"@@ -1,4 +1,4 @@\n-line 0 of a long tool output\n+LINE 0, changed\n" +
		" line 1 of a long tool output\n line 2 of a long tool output\n line 3 of a long tool output\n" +
		"@@ -4997,4 +4997,4 @@\n line 4996 of a long tool output\n line 4997 of a long tool output\n" +
		" line 4998 of a long tool output\n-line 4999 of a long tool output\n+LINE 4999, changed\n"
	if got := unifiedDiff(a, b); got != want {
		t.Errorf("got %d bytes:\n%.2000s\nwant\n%s", len(got), got, want)
	}
}

// The values a Mismatch holds rarely end with a newline: the diff says
// "No newline at end of file" only when exactly one of them does.
func TestUnifiedDiffFinalNewline(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"a\nb", "a\nc", "--- taped\n+++ actual\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
		{"a\nb\n", "a\nc\n", "--- taped\n+++ actual\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"},
		{"b", "b\n", "--- taped\n+++ actual\n@@ -1 +1 @@\n-b\n\\ No newline at end of file\n+b\n"},
		{"", "b", "--- taped\n+++ actual\n@@ -0,0 +1 @@\n+b\n"},
		{"same", "same", ""},
	} {
		if got := unifiedDiff(tc.a, tc.b); got != tc.want {
			t.Errorf("%q against %q: got\n%s\nwant\n%s", tc.a, tc.b, got, tc.want)
		}
	}
}
