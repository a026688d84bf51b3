// Package codex is the Codex backend: it owns the rollout format Codex
// writes under $CODEX_HOME/sessions (where its transcripts live and how to
// read them) and runs turns and forks through the codex CLI (CLI, turn.go).
//
// Turns, as checked with @openai/codex 0.169.0 (the message always on stdin):
//
//	new session   codex exec --json --skip-git-repo-check [FLAGS] -              < MSG
//	resume        codex exec resume --json --skip-git-repo-check [FLAGS] ID -    < MSG
//	fork at end   codex exec fork --json --skip-git-repo-check [FLAGS] ORIGIN -  < MSG
//	fork at K     write a rollout holding the origin's records through message K
//	              (a new id), then codex exec resume ... NEWID -                 < MSG
//
// FLAGS: --dangerously-bypass-approvals-and-sandbox (--permissions auto),
// -m MODEL. The process runs in the turn's directory (exec resume has no
// -C). A turn's messages are read from the rollout as Codex appends to it,
// through the parser below, so they carry its ordinals as NativeIDs.
//
// A rollout is one JSON record a line, {timestamp, ordinal, type, payload}
// (ordinal since 0.1xx; older files lack it). What a run is made of:
//
//   - session_meta: the thread id, cwd, git branch, creation time and, in a
//     fork, forked_from_id and forked_from_ordinal_exclusive.
//   - turn_context: the model of each turn (messages carry none).
//   - response_item: the model-visible history, the only source of
//     messages. Codex repeats user and assistant text as event_msg
//     records; those are ignored, except token_count for usage when a file
//     has no token_usage_record.
//   - token_usage_record: one model response's usage, after its items.
//   - compacted: a context compaction's summary, shown as a system message.
//
// Grouping: the assistant output items of one model response (reasoning,
// message, function and tool calls) form one assistant message, one step.
// A new assistant message starts after anything that is not assistant
// output (a user, developer or tool-result item) and after a usage record,
// which ends a response. Each tool output is its own tool-role message.
//
// Roles: developer and system messages, and user-role messages that Codex
// injects itself (<environment_context>, AGENTS.md instructions, skills,
// turn_aborted and other notices: known by their provenance metadata or,
// in older files, by their opening tag) become system messages, so that
// only what a person typed is a user prompt.
//
// Usage: Codex's input_tokens includes cached (and cache-write) tokens;
// messages store InputTokens = input - cached - cache_write,
// CacheReadTokens = cached, CacheWriteTokens = cache_write, so that
// Usage.Total counts every token once. Reasoning tokens are part of
// output_tokens. Each report carries the thread's total too: a response
// counts what it added to it, so a run's usage is the rollout's last
// total (a fork's, less its parent's at the fork), and a report with no
// assistant output before it goes to the next message.
//
// Status: a rollout whose last turn has no task_complete (it ends
// mid-turn, or with turn_aborted) is failed, "interrupted: ...".
package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"tine/model"
)

// Harness is this backend's name in runs and the registry.
const Harness = "codex"

// Dirs lists where Codex keeps rollouts: $CODEX_HOME/sessions, by default
// ~/.codex/sessions.
func Dirs() []string {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return []string{filepath.Join(h, "sessions")}
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return nil
	}
	return []string{filepath.Join(home, ".codex", "sessions")}
}

// Detect reports whether head, the first bytes of a file, looks like a Codex
// rollout: a first line whose record type is session_meta (or another
// rollout record type, in the {timestamp, type, payload} envelope), or the
// bare {id, timestamp, instructions|git} header of the oldest rollouts.
// The line is read as JSON, whatever its spacing and key order, and the
// type decides as soon as it is read (no other format writes these
// types), with or without a timestamp; head may end in the middle of the
// first line.
func Detect(head []byte) bool {
	head = bytes.TrimPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("\ufeff"))
	it := objectLine(head)
	if it.Err() != nil {
		return false
	}
	var hasTS, hasID, hasLegacy bool
	for k, v := range it.Members() {
		switch string(k) {
		case "type":
			return isRecordType(v)
		case "timestamp":
			hasTS = true
		case "id":
			hasID = true
		case "instructions", "git":
			hasLegacy = true
		}
	}
	// The oldest header has no type; a first line cut short ends the walk
	// early, which is fine once the keys it needs were seen.
	return hasTS && hasID && hasLegacy
}

func isRecordType(v []byte) bool {
	switch str(v) {
	case "session_meta", "response_item", "event_msg", "turn_context", "compacted", "token_usage_record", "world_state":
		return true
	}
	return false
}

// ForkPoint is K, how many of the parent's messages a fork inherits when
// its session_meta says forked_from_ordinal_exclusive = beforeOrdinal: the
// messages whose ordinal (NativeID) is below it. Ordinals continue across
// a fork, so parent may be a fork's full history (its inherited prefix
// followed by its own messages) when a fork is forked again. Snapping K to
// a pair-safe boundary is the importer's business. Messages without an
// ordinal are counted only when they come before one that is inherited.
func ForkPoint(parent []model.Message, beforeOrdinal int) int {
	k := 0
	for i, m := range parent {
		ord, err := strconv.Atoi(m.NativeID)
		if err != nil {
			continue
		}
		if ord >= beforeOrdinal {
			break
		}
		k = i + 1
	}
	return k
}
