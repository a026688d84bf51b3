package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// Rollouts of shapes other tools' and other Codex versions' files have
// (issue 18, "Fidelity"), written line by line: the 0.128/0.129 envelope,
// without ordinals.

// rec is one rollout record of type typ with payload.
func rec(sec int, typ, payload string) string {
	return fmt.Sprintf(`{"timestamp":"2026-05-02T10:00:%02d.000Z","type":"%s","payload":%s}`, sec, typ, payload) + "\n"
}

func metaRec(id string) string {
	return rec(0, "session_meta", `{"id":"`+id+`","timestamp":"2026-05-02T10:00:00.000Z","cwd":"/home/u/p","originator":"codex_vscode","cli_version":"0.128.0"}`)
}

func eventRec(sec int, payload string) string { return rec(sec, "event_msg", payload) }
func itemRec(sec int, payload string) string  { return rec(sec, "response_item", payload) }

func userItem(text string) string {
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}`
}

func answerItem(text string) string {
	return `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`
}

func userEvent(text string) string {
	return `{"type":"user_message","message":"` + text + `","images":[],"local_images":[],"text_elements":[]}`
}

func parseText(t *testing.T, src string) harness.ParsedFile {
	t.Helper()
	pf, err := Parse(strings.NewReader(src), "rollout-2026-05-02T10-00-00-0000dddd-0000-7000-8000-000000000001.jsonl")
	require.NoError(t, err)
	return pf
}

func said(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+": "+m.PlainText())
	}
	return out
}

// TestPromptsOnlyInEvents: a rollout whose prompts are only event_msg
// user_message records (Codex 0.128 from an IDE, 0.129 with skills) keeps
// every prompt; one that has both the item and the event has each prompt
// once, whichever comes first.
func TestPromptsOnlyInEvents(t *testing.T) {
	t.Parallel()
	turn := func(sec int, prompt, answer string) string {
		return eventRec(sec, `{"type":"task_started","turn_id":"t`+prompt+`"}`) +
			rec(sec, "turn_context", `{"cwd":"/home/u/p","model":"gpt-5.3-codex"}`) +
			eventRec(sec, userEvent(prompt)) +
			itemRec(sec+1, answerItem(answer)) +
			eventRec(sec+1, `{"type":"agent_message","message":"`+answer+`"}`) +
			eventRec(sec+2, `{"type":"task_complete","turn_id":"t`+prompt+`","last_agent_message":"`+answer+`"}`)
	}
	src := metaRec("0000dddd-0000-7000-8000-000000000001") +
		itemRec(0, `{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/u/p</cwd>\n</environment_context>"}]}`) +
		turn(1, "fix the bug", "Fixed.") + turn(10, "now test it", "Tested.")
	pf := parseText(t, src)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Equal(t, []string{"system: <environment_context>\n  <cwd>/home/u/p</cwd>\n</environment_context>",
		"user: fix the bug", "assistant: Fixed.", "user: now test it", "assistant: Tested."}, said(r.Messages))
	assert.Equal(t, "fix the bug", r.Run.Title)
	assert.True(t, r.Messages[1].IsPrompt())

	// Only a prompt, the turn aborted before any answer: still a run
	// holding it, not an empty file.
	pf = parseText(t, metaRec("0000dddd-0000-7000-8000-000000000001")+
		eventRec(1, `{"type":"task_started","turn_id":"a"}`)+eventRec(1, userEvent("hello"))+
		eventRec(2, `{"type":"turn_aborted","turn_id":"a","reason":"interrupted"}`))
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []string{"user: hello"}, said(pf.Runs[0].Messages))

	// Both the item and the event, in either order: once.
	for name, pair := range map[string]string{
		"item first":  itemRec(1, userItem("fix the bug")) + eventRec(1, userEvent("fix the bug")),
		"event first": eventRec(1, userEvent("fix the bug")) + itemRec(1, userItem("fix the bug")),
	} {
		pf := parseText(t, metaRec("0000dddd-0000-7000-8000-000000000001")+
			eventRec(1, `{"type":"task_started","turn_id":"a"}`)+pair+itemRec(2, answerItem("Fixed."))+
			// A prompt typed while the agent works (steering): its own
			// item and event, once.
			itemRec(3, userItem("and the docs"))+eventRec(3, userEvent("and the docs"))+
			itemRec(4, answerItem("Both done."))+eventRec(5, `{"type":"task_complete","turn_id":"a"}`))
		assert.Equal(t, []string{"user: fix the bug", "assistant: Fixed.", "user: and the docs", "assistant: Both done."},
			said(pf.Runs[0].Messages), name)
	}

	// The older events that repeat injected context (kind) are no prompts.
	pf = parseText(t, metaRec("0000dddd-0000-7000-8000-000000000001")+
		eventRec(1, `{"type":"user_message","message":"<user_instructions>be terse</user_instructions>","kind":"user_instructions"}`)+
		eventRec(1, userEvent("<environment_context><cwd>/x</cwd></environment_context>"))+
		eventRec(1, userEvent("go"))+itemRec(2, answerItem("ok")))
	assert.Equal(t, []string{"user: go", "assistant: ok"}, said(pf.Runs[0].Messages))
}

// TestPromptEventAcrossTheCut: a grown rollout read from where the last
// import stopped, the cut between a prompt's item and its event: the
// event is not taken for a second prompt.
func TestPromptEventAcrossTheCut(t *testing.T) {
	t.Parallel()
	meta := metaRec("0000dddd-0000-7000-8000-000000000001")
	head := meta + eventRec(1, `{"type":"task_started","turn_id":"a"}`) + itemRec(1, userItem("fix the bug"))
	tail := eventRec(1, userEvent("fix the bug")) + itemRec(2, answerItem("Fixed.")) + eventRec(3, `{"type":"task_complete","turn_id":"a"}`)
	pf, err := ParseTail(strings.NewReader(meta+tail), "r.jsonl", strings.NewReader(head+tail), int64(len(head)))
	require.NoError(t, err)
	assert.Equal(t, []string{"assistant: Fixed."}, said(pf.Runs[0].Messages))

	// Only events: the cut right after a prompt's event; the next turn's
	// prompt, only an event too, is taken.
	head = meta + eventRec(1, `{"type":"task_started","turn_id":"a"}`) + eventRec(1, userEvent("fix the bug"))
	tail = itemRec(2, answerItem("Fixed.")) + eventRec(3, `{"type":"task_complete","turn_id":"a"}`) +
		eventRec(4, `{"type":"task_started","turn_id":"b"}`) + eventRec(4, userEvent("thanks")) + itemRec(5, answerItem("Welcome."))
	pf, err = ParseTail(strings.NewReader(meta+tail), "r.jsonl", strings.NewReader(head+tail), int64(len(head)))
	require.NoError(t, err)
	assert.Equal(t, []string{"assistant: Fixed.", "user: thanks", "assistant: Welcome."}, said(pf.Runs[0].Messages))
}

// TestCallWithIDOnly: a function_call that has an id and no call_id (as
// some tools write them) is answered by the output that names that id.
func TestCallWithIDOnly(t *testing.T) {
	t.Parallel()
	pf := parseText(t, metaRec("0000dddd-0000-7000-8000-000000000001")+itemRec(1, userItem("list"))+
		itemRec(2, `{"type":"function_call","id":"fc_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"}`)+
		itemRec(3, `{"type":"function_call_output","call_id":"fc_1","output":"a.go"}`)+
		itemRec(4, answerItem("One file.")))
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 4)
	assert.Equal(t, "fc_1", msgs[1].Parts[0].ToolCallID)
	assert.Equal(t, "shell", msgs[2].Parts[0].ToolName, "the output is paired with its call")
	assert.Equal(t, []int{1, 3, 4}, model.Checkpoints(msgs), "the cut after the output is safe")
}

// spawnedRollout is the rollout of a thread that parent's spawn_agent
// call started, as Codex writes it.
func spawnedRollout(id, parent string) string {
	return rec(0, "session_meta", `{"id":"`+id+`","timestamp":"2026-05-02T10:00:02.000Z","cwd":"/home/u/p","originator":"codex_vscode","cli_version":"0.128.0",`+
		`"source":{"subagent":{"thread_spawn":{"parent_thread_id":"`+parent+`","depth":1,"agent_nickname":"Ada","agent_role":"explorer"}}}}`) +
		eventRec(2, `{"type":"task_started","turn_id":"s"}`) + itemRec(2, userItem("look at the tests")) +
		itemRec(3, answerItem("They pass.")) + eventRec(4, `{"type":"task_complete","turn_id":"s"}`)
}

const (
	parentThread = "0000dddd-0000-7000-8000-000000000001"
	childThread  = "0000dddd-0000-7000-8000-0000000000c1"
)

// collabRollout is a rollout whose agent spawned childThread and waited
// for it; the calls are answered by collab events, never by outputs.
func collabRollout(afterSpawn ...string) string {
	return metaRec(parentThread) + eventRec(1, `{"type":"task_started","turn_id":"a"}`) + itemRec(1, userItem("check the tests")) +
		itemRec(2, `{"type":"function_call","name":"spawn_agent","arguments":"{\"message\":\"look at the tests\"}","call_id":"call_spawn"}`) +
		eventRec(2, `{"type":"collab_agent_spawn_begin","call_id":"call_spawn","sender_thread_id":"`+parentThread+`","prompt":"look at the tests"}`) +
		eventRec(2, `{"type":"collab_agent_spawn_end","call_id":"call_spawn","sender_thread_id":"`+parentThread+`","new_thread_id":"`+childThread+`","prompt":"look at the tests","status":"pending_init"}`) +
		strings.Join(afterSpawn, "") +
		itemRec(3, `{"type":"function_call","name":"wait_agent","arguments":"{\"ids\":[\"`+childThread+`\"]}","call_id":"call_wait"}`) +
		eventRec(3, `{"type":"collab_waiting_begin","call_id":"call_wait","sender_thread_id":"`+parentThread+`","receiver_thread_ids":["`+childThread+`"]}`) +
		eventRec(5, `{"type":"collab_waiting_end","call_id":"call_wait","sender_thread_id":"`+parentThread+`","statuses":{"`+childThread+`":{"completed":"They pass."}}}`) +
		itemRec(6, answerItem("The tests pass.")) + eventRec(7, `{"type":"task_complete","turn_id":"a"}`)
}

// TestCollabCallsAreAnswered: spawn_agent and wait_agent are answered by
// the collab events with their call_id: each call has its result, and the
// cut after them is safe.
func TestCollabCallsAreAnswered(t *testing.T) {
	t.Parallel()
	pf := parseText(t, collabRollout())
	assert.Empty(t, pf.Skipped)
	msgs := pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant, model.Tool, model.Assistant}, roles(msgs))
	spawned := msgs[2].Parts[0]
	assert.Equal(t, "call_spawn", spawned.ToolCallID)
	assert.Equal(t, "spawn_agent", spawned.ToolName)
	assert.Contains(t, spawned.Text, childThread)
	waited := msgs[4].Parts[0]
	assert.Equal(t, "call_wait", waited.ToolCallID)
	assert.Contains(t, waited.Text, "completed: They pass.")
	assert.Equal(t, []int{1, 3, 5, 6}, model.Checkpoints(msgs))

	// A function_call_output for the same call as well: it is the result
	// (what the model saw), once.
	pf = parseText(t, collabRollout(itemRec(2, `{"type":"function_call_output","call_id":"call_spawn","output":"{\"agent_id\":\"`+childThread+`\"}"}`)))
	msgs = pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant, model.Tool, model.Assistant}, roles(msgs))
	assert.Equal(t, `{"agent_id":"`+childThread+`"}`, msgs[2].Parts[0].Text)
}

// TestSpawnedThreadIsASubagent: the rollout of a thread spawn_agent
// started is the subagent of its parent thread, under the call that
// spawned it when the parent's rollout is there.
func TestSpawnedThreadIsASubagent(t *testing.T) {
	t.Parallel()
	day := filepath.Join(t.TempDir(), "sessions", "2026", "05", "02")
	require.NoError(t, os.MkdirAll(day, 0o755))
	child := filepath.Join(day, "rollout-2026-05-02T10-00-02-"+childThread+".jsonl")
	require.NoError(t, os.WriteFile(child, []byte(spawnedRollout(childThread, parentThread)), 0o644))

	// The parent's rollout is not there (yet): the subagent names its
	// parent session, the call unknown.
	pf, err := ParseFile(child)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Nil(t, pf.Runs[0].Fork)
	assert.Equal(t, &harness.SubagentHint{ParentSession: parentThread}, pf.Runs[0].Subagent)

	require.NoError(t, os.WriteFile(filepath.Join(day, "rollout-2026-05-02T10-00-00-"+parentThread+".jsonl"), []byte(collabRollout()), 0o644))
	pf, err = ParseFile(child)
	require.NoError(t, err)
	assert.Equal(t, &harness.SubagentHint{ParentSession: parentThread, ToolCallID: "call_spawn"}, pf.Runs[0].Subagent)
	assert.Equal(t, "look at the tests", pf.Runs[0].Run.Title)
}
