// Package claude is the Claude Code backend. It owns everything about Claude
// Code's transcripts: where they live (Dirs), how to recognise one (Detect)
// and how to read one into runs (Parse, ParseFile), including in-file
// branches, --fork-session copies and subagent sidechains; and it runs
// turns through the claude CLI (CLI, in turn.go).
//
// The format, as Claude Code 2.1.328 writes it (see testdata/agents/README.md
// and testdata/claude/README.md): one JSON record a line; records with a
// uuid form a tree through parentUuid; an assistant message is written as
// one record per content block sharing message.id; tool results come back
// as user records, each a child of the record holding its tool_use;
// attachments and bookkeeping sit inside the chain; records without a uuid
// are bookkeeping (queue operations, request shapes, cost, titles).
//
// What tine makes of it:
//   - a message's NativeID is its record's uuid; a message merged from
//     several records (an assistant's blocks, a compaction's boundary and
//     summary) takes its first record's, in every file, so fork copies
//     match their originals;
//   - a user record holding only tool results is a model.Tool message, as
//     every tine backend has them, so the tree shows tool output the same
//     way whatever the agent; one that also carries text stays model.User;
//   - usage counts once per message.id (the largest seen on its records);
//   - attachments, isMeta records (injected context) and other bookkeeping
//     are walked through: a message's parent is the nearest message above.
//
// Turns, as Claude Code 2.1.328 runs them (checked against the scripted
// model server in integration_test.go). Every turn is one process,
//
//	claude -p --input-format stream-json --output-format stream-json --verbose
//	    --include-partial-messages [--model M]
//	    [--permission-mode acceptEdits --allowedTools Bash,Edit,Write,Read,Glob,Grep,NotebookEdit,WebFetch,WebSearch]
//
// run in the turn's directory, given one user message on stdin:
// {"type":"user","message":{"role":"user","content":PROMPT},"uuid":U,...}.
// Claude keeps U as the record's uuid, so the person's message has its
// NativeID before the CLI starts (and no prompt meets argv's size limit).
// Then, by case:
//   - a fork's first turn: --resume ORIGIN --fork-session --session-id NEW
//     --resume-session-at R, R being the uuid of the last record of message
//     K in the origin's transcript. R is given at the end too, so a session
//     that grew since is still cut at K; it never goes without
//     --fork-session (alone, it writes a branch into the origin's own
//     file). --resume finds a
//     session recorded under any cwd; one known only from an imported file
//     elsewhere is first copied into the turn directory's project folder.
//     Answering again (no input) branches at K-1 and sends message K's text
//     again under message K's own uuid.
//   - the next turn of a run tine drove: --resume OWN.
//   - a handoff, or a new session: --session-id NEW, the prompt being
//     harness.HandoffPrompt.
//
// stdout: system/init (session_id), then per API message its stream events
// (message_start, text deltas, message_delta with the final usage,
// message_stop) around one assistant record per content block, user records
// with tool results, system/api_retry while the model API fails (Claude
// retries 10 times with backoff; CLAUDE_CODE_MAX_RETRIES lowers that),
// system/permission_denied, and a result. The records carry the
// transcript's uuids, timestamps and content, so the parser converts them;
// the usage on assistant records is message_start's, the final one is
// message_delta's. result.total_cost_usd is the session's running total (a
// fork's counts its origin's); model_usage_since_last_result[*].costUSD is
// this process's own spending, reported as the turn's cost.
//
// Permissions: running as root, Claude refuses --dangerously-skip-permissions
// and bypassPermissions (IS_SANDBOX=1 lifts that but makes it probe the
// internet), so PermitAuto names the tools; PermitAsk passes nothing, and a
// tool needing approval is refused (Claude tells the model and goes on);
// the turn then fails, naming the tool.
package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"tine/harness"
	"tine/internal/jsonl"
)

// Harness is this backend's name in runs and the registry.
const Harness = "claude"

// Dirs lists where Claude Code keeps transcripts: $CLAUDE_CONFIG_DIR/projects
// when that is set, else ~/.claude/projects. The CLI reads CLAUDE_CONFIG_DIR
// as one directory (no list), falling back to ~/.claude when it is unset.
func Dirs() []string { return dirsFrom(os.Getenv) }

// dirsFrom is Dirs for an environment: a turn asks it with the
// environment the CLI runs in, which may set its own HOME.
func dirsFrom(getenv func(string) string) []string {
	if d := strings.TrimSpace(getenv("CLAUDE_CONFIG_DIR")); d != "" {
		return []string{filepath.Join(d, "projects")}
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return nil
	}
	return []string{filepath.Join(home, ".claude", "projects")}
}

// Detect reports whether head, the first bytes of a file, looks like a
// Claude Code transcript: its first line is a JSON object with Claude's
// camel-case chain or session keys (parentUuid, sessionId, leafUuid), a
// type only Claude writes first, or the shape of its message records
// (type user or assistant, a uuid, a message with a role or content), as
// other tools export them without the session keys. Codex (session_meta,
// payload), pi (a "session" header), Qwen Code (whose records carry
// provenance or systemPayload, and messages of parts) and Gemini CLI (a
// header with a projectHash) do not match. The
// line is read as JSON, whatever its spacing and key order; head may end
// mid-line, and then what was read of it decides.
func Detect(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	line := head
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	claude, record, uuid, message := false, false, false, false
	o := newObject(line)
	for k, v := range o.Members() {
		switch string(k) {
		case "payload":
			return false // Codex's envelope
		case "provenance", "systemPayload":
			return false // Qwen Code's records (uuid, parentUuid and sessionId too, but these)
		case "projectHash":
			return false // Gemini CLI's header (a sessionId too, but this)
		case "uuid":
			_, uuid = str(v)
		case "message":
			message = claudeMessage(v)
		case "type":
			switch t := strOr(v); t {
			case "session_meta", "session":
				return false // Codex's and pi's headers
			case "queue-operation", "file-history-snapshot", "fork-context-ref", "atis-latch", "tools-used", "custom-title", "ai-title":
				claude = true
			case "user", "assistant":
				record = true
			}
		case "parentUuid":
			claude = true
		case "sessionId", "leafUuid":
			if _, isStr := str(v); isStr {
				claude = true
			}
		}
	}
	return claude || record && uuid && message
}

// claudeMessage reports whether v is a message as Claude Code's records
// hold one: an object with a role or content, and no parts (Gemini's and
// Qwen Code's messages hold parts).
func claudeMessage(v []byte) bool {
	shaped := false
	m := members(v)
	for k := range m.Members() {
		switch string(k) {
		case "role", "content":
			shaped = true
		case "parts":
			return false
		}
	}
	return shaped && m.Err() == nil
}

// ParseFile reads the transcript at path. For a subagent's file
// (<session>/subagents/agent-<id>.jsonl) it also reads the sidecar
// agent-<id>.meta.json for the tool call that started the subagent, or,
// when that is missing (older versions), finds the call in the parent
// session's file.
func ParseFile(path string) (harness.ParsedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// subagentInfo reads the sidecar agent-<id>.meta.json of a subagent's
// file, when path names one on disk: the tool call that started the
// subagent and its task description.
func subagentInfo(path string) fileInfo {
	var info fileInfo
	base := filepath.Base(path)
	if !strings.HasPrefix(base, "agent-") || !strings.HasSuffix(base, ".jsonl") {
		return info
	}
	info.path = path
	if b, err := os.ReadFile(strings.TrimSuffix(path, ".jsonl") + ".meta.json"); err == nil {
		var meta struct {
			ToolUseID   string `json:"toolUseId"`
			Description string `json:"description"`
		}
		if json.Unmarshal(b, &meta) == nil {
			info.toolUseID, info.description = meta.ToolUseID, meta.Description
		}
	}
	return info
}

// findAgentCall looks, in the parent session's file, for the tool result
// that reported agentID, and returns its tool_use_id. The parent's file is
// <project>/<session>.jsonl both for 2.x's
// <project>/<session>/subagents/agent-<id>.jsonl and for older versions,
// which kept agent-<id>.jsonl next to the sessions.
func findAgentCall(path, agentID, session string) string {
	if agentID == "" {
		return ""
	}
	dir := filepath.Dir(path)
	parent := filepath.Join(dir, session+".jsonl")
	if filepath.Base(dir) == "subagents" {
		parent = filepath.Dir(dir) + ".jsonl"
	} else if session == "" || strings.ContainsAny(session, `/\`) {
		return ""
	}
	return scanAgentCall(parent, []byte(`"agentId":"`+agentID+`"`))
}

// scanAgentCall finds, in one file, a user record holding needle (the
// toolUseResult's agentId) and a tool result, and returns that result's
// tool_use_id.
func scanAgentCall(path string, needle []byte) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	lr := jsonl.NewReader(f, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.TooLong {
			continue // only its head is held
		}
		line := l.Text
		if bytes.Contains(line, needle) && bytes.Contains(line, []byte(`"tool_result"`)) {
			if id := toolResultID(line); id != "" {
				return id
			}
		}
	}
	return ""
}

// toolResultID returns the tool_use_id of the first tool result in a user
// record's content.
func toolResultID(line []byte) string {
	var msg, content []byte
	o := newObject(line)
	for k, v := range o.Members() {
		if string(k) == "message" {
			msg = v
		}
	}
	o = members(msg)
	for k, v := range o.Members() {
		if string(k) == "content" {
			content = v
		}
	}
	a := elements(content)
	for v := range a.Elements() {
		if b, ok := readBlock(v); ok && strOr(b.typ) == "tool_result" {
			return strOr(b.toolUseID)
		}
	}
	return ""
}
