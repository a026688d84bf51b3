package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// testdata is the repository's testdata directory.
const testdata = "../../testdata"

// agentsIndex is testdata/agents/out/claude/index.json: the real CLI runs
// that made testdata/claude/projects (names change on every regeneration).
type agentsIndex struct {
	Runs []struct {
		Step       string            `json:"step"`
		SessionID  string            `json:"session_id"`
		Transcript string            `json:"transcript"`
		Stdout     string            `json:"stdout"`
		Extra      map[string]string `json:"extra"`
	} `json:"runs"`
}

// extraIndex is testdata/claude/extra/out/index.json, written by
// testdata/claude/gen (parallel calls, rewind, subagents, image, compaction).
type extraIndex struct {
	Steps []struct {
		Step      string            `json:"step"`
		SessionID string            `json:"session_id"`
		Stdout    string            `json:"stdout"`
		Extra     map[string]string `json:"extra"`
	} `json:"steps"`
	Transcripts []string `json:"transcripts"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// reported is what Claude printed in a run's final stream-json result:
// usage is this process's own API calls; modelUsage is the session's
// running total (it includes subagents and, after a resume or fork, what
// came before).
type reported struct {
	Usage      model.Usage
	ModelUsage model.Usage
}

func readResult(t *testing.T, path string) reported {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct {
			Type  string `json:"type"`
			Usage struct {
				In    int64 `json:"input_tokens"`
				Out   int64 `json:"output_tokens"`
				Read  int64 `json:"cache_read_input_tokens"`
				Write int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
			ModelUsage map[string]struct {
				In    int64 `json:"inputTokens"`
				Out   int64 `json:"outputTokens"`
				Read  int64 `json:"cacheReadInputTokens"`
				Write int64 `json:"cacheCreationInputTokens"`
			} `json:"modelUsage"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "result" {
			continue
		}
		r := reported{Usage: model.Usage{InputTokens: ev.Usage.In, OutputTokens: ev.Usage.Out, CacheReadTokens: ev.Usage.Read, CacheWriteTokens: ev.Usage.Write}}
		for _, m := range ev.ModelUsage {
			r.ModelUsage = r.ModelUsage.Add(model.Usage{InputTokens: m.In, OutputTokens: m.Out, CacheReadTokens: m.Read, CacheWriteTokens: m.Write})
		}
		return r
	}
	t.Fatalf("%s: no result event", path)
	return reported{}
}

func sub(a, b model.Usage) model.Usage {
	return model.Usage{
		InputTokens:      a.InputTokens - b.InputTokens,
		OutputTokens:     a.OutputTokens - b.OutputTokens,
		CacheReadTokens:  a.CacheReadTokens - b.CacheReadTokens,
		CacheWriteTokens: a.CacheWriteTokens - b.CacheWriteTokens,
	}
}

// full is run i's whole conversation: its parent's first ForkAt messages,
// then its own.
func full(pf harness.ParsedFile, i int) []model.Message {
	r := pf.Runs[i]
	if r.Parent < 0 {
		return r.Messages
	}
	return append(append([]model.Message{}, full(pf, r.Parent)[:r.ForkAt]...), r.Messages...)
}

// realFiles lists every transcript the real CLI wrote under testdata/claude.
func realFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, root := range []string{"claude/projects", "claude/extra/projects"} {
		err := filepath.WalkDir(filepath.Join(testdata, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
				files = append(files, p)
			}
			return err
		})
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, len(files), 9)
	return files
}

func parseFile(t *testing.T, path string) harness.ParsedFile {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err, path)
	return pf
}

// checkFile checks what must hold for any parsed file: runs link only
// backwards, every tool call pairs with a result by id and the end of each
// finished run is a checkpoint.
func checkFile(t *testing.T, pf harness.ParsedFile, name string) {
	t.Helper()
	for i, r := range pf.Runs {
		assert.Equal(t, Harness, r.Run.Harness, name)
		assert.Equal(t, model.Completed, r.Run.Status, name)
		assert.NotEmpty(t, r.Run.NativeID, name)
		if r.Parent >= 0 {
			require.Less(t, r.Parent, i, "%s run %d: parent must come first", name, i)
			assert.LessOrEqual(t, r.ForkAt, len(full(pf, r.Parent)), name)
		}
		msgs := full(pf, i)
		require.NotEmpty(t, msgs, "%s run %d", name, i)
		calls, results := map[string]int{}, map[string]int{}
		for k, m := range msgs {
			for _, p := range m.Parts {
				switch p.Kind {
				case model.ToolCall:
					calls[p.ToolCallID] = k
				case model.ToolResult:
					results[p.ToolCallID] = k
				}
				if p.Kind == model.Image {
					assert.Less(t, len(p.Raw), 300, "%s: an image keeps a placeholder, not its data", name)
				}
			}
		}
		for id, k := range calls {
			at, ok := results[id]
			if assert.True(t, ok, "%s run %d: call %s has no result", name, i, id) {
				assert.Greater(t, at, k, "%s: result before its call", name)
			}
		}
		cps := model.Checkpoints(msgs)
		if assert.NotEmpty(t, cps, "%s run %d", name, i) {
			assert.Equal(t, len(msgs), cps[len(cps)-1], "%s run %d: the end of a finished run is a checkpoint", name, i)
		}
	}
}

// distinctUsage sums, straight from the file, the usage of each assistant
// message.id once (its last record's), as an independent check of the
// parser's "once per message.id".
func distinctUsage(t *testing.T, path string) model.Usage {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	byID := map[string]model.Usage{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r struct {
			Type    string `json:"type"`
			Message struct {
				ID    string `json:"id"`
				Usage struct {
					In    int64 `json:"input_tokens"`
					Out   int64 `json:"output_tokens"`
					Read  int64 `json:"cache_read_input_tokens"`
					Write int64 `json:"cache_creation_input_tokens"`
				} `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &r) != nil || r.Type != "assistant" {
			continue
		}
		u := r.Message.Usage
		byID[r.Message.ID] = model.Usage{InputTokens: u.In, OutputTokens: u.Out, CacheReadTokens: u.Read, CacheWriteTokens: u.Write}
	}
	var sum model.Usage
	for _, u := range byID {
		sum = sum.Add(u)
	}
	return sum
}

func TestRealFiles(t *testing.T) {
	for _, path := range realFiles(t) {
		pf := parseFile(t, path)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Empty(t, pf.Skipped, path)
		assert.Equal(t, st.Size(), pf.Offset, "%s: every line is complete", path)
		require.NotEmpty(t, pf.Runs, path)
		checkFile(t, pf, path)

		// Usage once per message.id: the messages of all runs of the file
		// (inherited copies included) add up to each id counted once. A
		// "fork" subagent's copy of its parent's calling message is the
		// one exception: its usage is the parent's.
		var sum model.Usage
		for _, r := range pf.Runs {
			sum = sum.Add(model.OwnUsage(r.Messages, 0))
		}
		if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(`"type":"fork-context-ref"`)) {
			assert.Equal(t, distinctUsage(t, path), sum, path)
		}
	}
}

func TestAgentsRuns(t *testing.T) {
	var idx agentsIndex
	readJSON(t, filepath.Join(testdata, "agents/out/claude/index.json"), &idx)
	require.Len(t, idx.Runs, 4)
	step := map[string]int{}
	for i, r := range idx.Runs {
		step[r.Step] = i
	}
	res := func(s string) reported {
		return readResult(t, filepath.Join(testdata, idx.Runs[step[s]].Stdout))
	}
	mainID := idx.Runs[step["1-hello"]].SessionID
	require.Equal(t, mainID, idx.Runs[step["2-bash"]].SessionID, "2-bash resumes the main session")

	main := parseFile(t, filepath.Join(testdata, idx.Runs[step["2-bash"]].Transcript))
	require.Len(t, main.Runs, 1)
	mr := main.Runs[0]
	assert.Equal(t, mainID, mr.Run.NativeID)
	assert.Nil(t, mr.Fork)
	assert.Nil(t, mr.Subagent)
	assert.Equal(t, "/tmp/tine-gen/project", mr.Run.Cwd)
	assert.Equal(t, "main", mr.Run.Branch)
	assert.Equal(t, "claude-opus-5-5", mr.Run.Model)
	assert.Equal(t, "say hello", mr.Run.Title)
	assert.False(t, mr.Run.CreatedAt.IsZero())
	roles := []model.Role{model.User, model.Assistant, model.User, model.Assistant, model.Tool, model.Assistant}
	require.Len(t, mr.Messages, len(roles))
	for i, m := range mr.Messages {
		assert.Equal(t, roles[i], m.Role, "message %d", i)
	}
	// The Bash turn: thinking, text and the call, three records of one message.
	turn := mr.Messages[3]
	require.Len(t, turn.Parts, 3)
	assert.Equal(t, model.Thinking, turn.Parts[0].Kind)
	assert.Equal(t, "The user wants me to run a shell command.", turn.Parts[0].Text)
	assert.Equal(t, model.Text, turn.Parts[1].Kind)
	assert.Equal(t, model.ToolCall, turn.Parts[2].Kind)
	assert.Equal(t, "Bash", turn.Parts[2].ToolName)
	assert.JSONEq(t, `{"command":"echo hi && ls","description":"Print hi and list files"}`, turn.Parts[2].ToolInput)
	assert.Equal(t, model.Usage{InputTokens: 40, OutputTokens: 60, CacheReadTokens: 3000, CacheWriteTokens: 200}, turn.Usage, "once, not three times")
	res5 := mr.Messages[4].Parts[0]
	assert.Equal(t, turn.Parts[2].ToolCallID, res5.ToolCallID)
	assert.Equal(t, "Bash", res5.ToolName)
	assert.Equal(t, "hi\nREADME.md\nnotes.txt", res5.Text)
	assert.False(t, mr.Messages[4].IsPrompt())
	assert.Equal(t, []int{1, 2, 3, 5, 6}, model.Checkpoints(mr.Messages))

	// The main session's own usage is what Claude reported for its two
	// invocations (1-hello and 2-bash), each result.usage summing that
	// process's API calls.
	assert.Equal(t, res("1-hello").Usage.Add(res("2-bash").Usage), mr.Run.Usage)
	// cost-state is the session's running total; for a session that is not
	// a fork it is the session's own cost.
	assert.InDelta(t, 0.02492, mr.Run.CostUSD, 1e-9)

	ids := map[string]bool{}
	for _, m := range mr.Messages {
		ids[m.NativeID] = true
	}
	inherited := map[string]int{}
	for _, tc := range []struct {
		step      string
		inherited int
		last      string // the parent's message the copy ends with
	}{
		{"3-fork", 6, "The command printed: hi"},
		{"4-fork-at", 2, "Hello! I am the scripted test model."},
	} {
		r := idx.Runs[step[tc.step]]
		pf := parseFile(t, filepath.Join(testdata, r.Transcript))
		require.Len(t, pf.Runs, 1, tc.step)
		fr := pf.Runs[0]
		assert.Equal(t, r.SessionID, fr.Run.NativeID, tc.step)
		require.NotNil(t, fr.Fork, tc.step)
		assert.Equal(t, mainID, fr.Fork.ParentSession, tc.step)
		assert.Equal(t, tc.inherited, fr.Fork.Inherited, tc.step)
		assert.True(t, ids[fr.Fork.AfterMessage], "%s: AfterMessage %s is a message of the parent", tc.step, fr.Fork.AfterMessage)
		assert.Equal(t, mr.Messages[tc.inherited-1].NativeID, fr.Fork.AfterMessage, tc.step)
		assert.Equal(t, tc.last, mr.Messages[tc.inherited-1].PlainText(), tc.step)
		// The copies are the parent's messages, same ids, same content.
		for k := 0; k < tc.inherited; k++ {
			assert.Equal(t, mr.Messages[k].NativeID, fr.Messages[k].NativeID, tc.step)
			assert.Equal(t, mr.Messages[k].Parts, fr.Messages[k].Parts, tc.step)
		}
		// Two own messages: the new prompt and its answer.
		require.Len(t, fr.Messages, tc.inherited+2, tc.step)
		assert.True(t, fr.Messages[tc.inherited].IsPrompt(), tc.step)
		// The fork's own usage is its invocation's result.usage: the
		// inherited messages carry none into it.
		assert.Equal(t, res(tc.step).Usage, fr.Run.Usage, tc.step)
		assert.Zero(t, fr.Run.CostUSD, "%s: a fork's cost-state includes its parent's", tc.step)
		inherited[tc.step] = fr.Fork.Inherited
		if tc.step == "4-fork-at" {
			// The copy ends at the record --resume-session-at named.
			assert.Equal(t, r.Extra["resume_session_at"], fr.Fork.AfterMessage)
		}
	}
	assert.Less(t, inherited["4-fork-at"], inherited["3-fork"], "--resume-session-at inherits fewer messages")
}

func TestExtraRuns(t *testing.T) {
	var idx extraIndex
	readJSON(t, filepath.Join(testdata, "claude/extra/out/index.json"), &idx)
	step := map[string]int{}
	for i, s := range idx.Steps {
		step[s.Step] = i
	}
	res := func(s string) reported {
		i, ok := step[s]
		require.True(t, ok, s)
		return readResult(t, filepath.Join(testdata, "claude/extra", idx.Steps[i].Stdout))
	}
	session := func(s string) string { return idx.Steps[step[s]].SessionID }
	file := func(rel string) string {
		for _, f := range idx.Transcripts {
			if strings.HasSuffix(f, rel) {
				return filepath.Join(testdata, "claude/extra", f)
			}
		}
		t.Fatalf("no transcript %s", rel)
		return ""
	}

	t.Run("parallel calls and a rewind", func(t *testing.T) {
		pf := parseFile(t, file(session("1-parallel")+".jsonl"))
		// Two runs: the parallel tool results are not branches; the
		// rewind (--resume-session-at without --fork-session) is.
		require.Len(t, pf.Runs, 2)
		mr, br := pf.Runs[0], pf.Runs[1]
		roles := []model.Role{model.User, model.Assistant, model.Tool, model.Tool, model.Assistant, model.User, model.Assistant}
		require.Len(t, mr.Messages, len(roles))
		for i, m := range mr.Messages {
			assert.Equal(t, roles[i], m.Role, "message %d", i)
		}
		assert.Len(t, mr.Messages[1].ToolCalls(), 2)
		assert.Equal(t, "branch: say another thing", mr.Messages[5].PlainText(), "the newest leaf is the main line")
		assert.Equal(t, []int{1, 4, 5, 6, 7}, model.Checkpoints(mr.Messages))
		assert.Equal(t, 0, br.Parent)
		assert.Equal(t, 5, br.ForkAt, "the branch leaves after turn 1's answer")
		assert.Equal(t, idx.Steps[step["3-rewind"]].Extra["resume_session_at"], mr.Messages[4].NativeID)
		require.Len(t, br.Messages, 2)
		assert.Equal(t, "say something", br.Messages[0].PlainText())
		assert.Equal(t, "say something", br.Run.Title)
		assert.Equal(t, "run two commands at once", mr.Run.Title)
		// Claude's own accounts: the main line is 1-parallel + 3-rewind,
		// the branch 2-turn2.
		assert.Equal(t, res("1-parallel").Usage.Add(res("3-rewind").Usage), mr.Run.Usage)
		assert.Equal(t, res("2-turn2").Usage, br.Run.Usage)
		assert.Equal(t, res("3-rewind").ModelUsage, mr.Run.Usage.Add(br.Run.Usage), "the session total")
	})

	t.Run("subagent", func(t *testing.T) {
		pf := parseFile(t, file(session("4-subagent")+".jsonl"))
		require.Len(t, pf.Runs, 1)
		mr := pf.Runs[0]
		calls := mr.Messages[1].ToolCalls()
		require.Len(t, calls, 1)
		assert.Equal(t, "Agent", calls[0].ToolName)
		assert.Equal(t, res("4-subagent").Usage, mr.Run.Usage)

		matches, _ := filepath.Glob(filepath.Join(filepath.Dir(file(session("4-subagent")+".jsonl")), session("4-subagent"), "subagents", "agent-*.jsonl"))
		require.Len(t, matches, 1)
		sf := parseFile(t, matches[0])
		require.Len(t, sf.Runs, 1)
		sr := sf.Runs[0]
		require.NotNil(t, sr.Subagent)
		assert.Equal(t, session("4-subagent"), sr.Subagent.ParentSession)
		assert.Equal(t, calls[0].ToolCallID, sr.Subagent.ToolCallID)
		assert.Equal(t, strings.TrimSuffix(filepath.Base(matches[0]), ".jsonl"), sr.Run.NativeID)
		assert.Equal(t, "List files", sr.Run.Title, "the task description from the sidecar")
		assert.Equal(t, "List the files in the project. SUBTASK-7", sr.Messages[0].PlainText())
		assert.Nil(t, sr.Fork)
		// Claude's session total (modelUsage) is the main line plus the subagent.
		assert.Equal(t, sub(res("4-subagent").ModelUsage, res("4-subagent").Usage), sr.Run.Usage)

		// Without the sidecar (older versions), the parent's tool result
		// names the agent.
		dir := t.TempDir()
		sess := session("4-subagent")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sess, "subagents"), 0o755))
		copyFile(t, file(sess+".jsonl"), filepath.Join(dir, sess+".jsonl"))
		noMeta := filepath.Join(dir, sess, "subagents", filepath.Base(matches[0]))
		copyFile(t, matches[0], noMeta)
		nf := parseFile(t, noMeta)
		require.NotNil(t, nf.Runs[0].Subagent)
		assert.Equal(t, calls[0].ToolCallID, nf.Runs[0].Subagent.ToolCallID)

		// Parsed without its path, the link to the call is unknown.
		f, err := os.Open(matches[0])
		require.NoError(t, err)
		defer f.Close()
		plain, err := Parse(f, "agent.jsonl")
		require.NoError(t, err)
		require.NotNil(t, plain.Runs[0].Subagent)
		assert.Empty(t, plain.Runs[0].Subagent.ToolCallID)
	})

	t.Run("fork subagent", func(t *testing.T) {
		pf := parseFile(t, file(session("9-fork-subagent")+".jsonl"))
		mr := pf.Runs[0]
		assert.Equal(t, res("9-fork-subagent").Usage, mr.Run.Usage)
		matches, _ := filepath.Glob(filepath.Join(filepath.Dir(file(session("9-fork-subagent")+".jsonl")), session("9-fork-subagent"), "subagents", "agent-*.jsonl"))
		require.Len(t, matches, 1)
		sf := parseFile(t, matches[0])
		sr := sf.Runs[0]
		require.NotNil(t, sr.Subagent)
		assert.Equal(t, mr.Messages[1].ToolCalls()[0].ToolCallID, sr.Subagent.ToolCallID)
		// It starts with a copy of the parent's calling message, whose
		// usage the parent already counts.
		assert.Equal(t, mr.Messages[1].Parts, sr.Messages[0].Parts)
		assert.True(t, sr.Messages[0].Usage.IsZero())
		assert.Equal(t, sub(res("9-fork-subagent").ModelUsage, res("9-fork-subagent").Usage), sr.Run.Usage)
	})

	t.Run("image", func(t *testing.T) {
		pf := parseFile(t, file(session("5-image")+".jsonl"))
		mr := pf.Runs[0]
		require.Len(t, mr.Messages, 4)
		tool := mr.Messages[2]
		assert.Equal(t, model.Tool, tool.Role)
		require.Len(t, tool.Parts, 2)
		assert.Equal(t, model.ToolResult, tool.Parts[0].Kind)
		assert.Equal(t, "Read", tool.Parts[0].ToolName)
		assert.Equal(t, model.Image, tool.Parts[1].Kind)
		assert.JSONEq(t, `{"type":"image","source":"base64","media_type":"image/png","bytes":76}`, tool.Parts[1].Raw)
		assert.Equal(t, res("5-image").Usage, mr.Run.Usage)
	})

	t.Run("compaction", func(t *testing.T) {
		pf := parseFile(t, file(session("6-compact-hello")+".jsonl"))
		require.Len(t, pf.Runs, 1, "the boundary continues the conversation; no second root")
		mr := pf.Runs[0]
		roles := []model.Role{model.User, model.Assistant, model.System, model.User, model.System, model.User, model.Assistant}
		require.Len(t, mr.Messages, len(roles))
		for i, m := range mr.Messages {
			assert.Equal(t, roles[i], m.Role, "message %d", i)
		}
		boundary := mr.Messages[2]
		require.Len(t, boundary.Parts, 2)
		assert.Regexp(t, `^conversation compacted \(manual, \d+ tokens before\)$`, boundary.Parts[0].Text)
		assert.Contains(t, boundary.Parts[1].Text, "The user asked for a hello and got one.")
		assert.Equal(t, "/compact", mr.Messages[3].PlainText())
		assert.Equal(t, "Compacted", mr.Messages[4].PlainText())
		assert.Equal(t, "say hello before compacting", mr.Run.Title)
		// The compaction's own model call appears in neither the
		// transcript nor result.usage (it reports 0 for /compact).
		assert.Equal(t, res("6-compact-hello").Usage.Add(res("7-compact").Usage).Add(res("8-after-compact").Usage), mr.Run.Usage)
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

func TestDetect(t *testing.T) {
	for _, path := range realFiles(t) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.True(t, Detect(b[:min(len(b), 512)]), path)
		assert.True(t, Detect(b[:min(len(b), 100)]), "%s: a cut head", path)
	}
	for _, glob := range []string{"codex/sessions/*/*/*/*.jsonl", "pi/sessions/*/*.jsonl", "agents/out/claude/*.stdout.jsonl", "openai/*", "../harness/qwen/testdata/*.jsonl", "../harness/gemini/testdata/*.jsonl"} {
		files, _ := filepath.Glob(filepath.Join(testdata, glob))
		require.NotEmpty(t, files, glob)
		for _, path := range files {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.False(t, Detect(b[:min(len(b), 4096)]), path)
		}
	}
	assert.False(t, Detect(nil))
	assert.False(t, Detect([]byte("hello\n")))
	assert.True(t, Detect([]byte(`{"type":"summary","summary":"x","leafUuid":"u"}`+"\n")))
	assert.True(t, Detect([]byte(`{"type":"file-history-snapshot","messageId":"m"}`)))
	// Read as JSON: spacing and key order do not matter.
	assert.True(t, Detect([]byte(`{"type": "user", "uuid": "u", "parentUuid": null, "sessionId": "s"}`+"\n")))
	assert.True(t, Detect([]byte(`{"messageId":"m", "type" : "file-history-snapshot"}`)))
	assert.False(t, Detect([]byte(`{"type": "session", "version": 3, "id": "x"}`)), "pi, spaced")
	assert.False(t, Detect([]byte(`{"type": "session_meta", "payload": {"id": "x", "sessionId": "s"}}`)), "codex, spaced")
	assert.False(t, Detect([]byte(`{"sessionId": 5}`)), "a session id is a string")
}

func TestDirs(t *testing.T) {
	t.Setenv("CLAUDE_CONFIG_DIR", "/cfg/claude")
	assert.Equal(t, []string{"/cfg/claude/projects"}, Dirs())
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("HOME", "/home/someone")
	assert.Equal(t, []string{"/home/someone/.claude/projects"}, Dirs())
}
