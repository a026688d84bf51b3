// Package qwen is the Qwen Code backend (@qwen-code/qwen-code): it owns
// Qwen Code's session files (where they live, how to tell one, how to read
// one into runs) and runs turns and forks through the qwen CLI (CLI, in
// turn.go). Everything tine knows of it is in its descriptor (Agent).
//
// The format, as Qwen Code 0.24.4 writes it (checked with the pinned CLI
// against the scripted model server): one JSON record a line in
// <runtime dir>/projects/<cwd, every character but ASCII letters and
// digits as ->/chats/<sessionId>.jsonl, the runtime dir being
// $QWEN_RUNTIME_DIR, else $QWEN_HOME, else ~/.qwen. Every record has a
// uuid and a parentUuid (null for the first), sessionId, timestamp, type,
// cwd, version and gitBranch; the records form a tree, so a branch made
// inside the file (a rewind) is a fork at the record it leaves. Records
// that share a uuid are one message, merged as Qwen Code's reader merges
// them (head, in parse.go).
//
//   - type "user": message {role: "user", parts: [{text}]}, the person's
//     prompt (provenance "real_user");
//   - type "assistant": message {role: "model", parts: [{text} | {text,
//     thought: true} | {functionCall: {id, name, args}}]}, model, and
//     usageMetadata {promptTokenCount, candidatesTokenCount,
//     thoughtsTokenCount, cachedContentTokenCount, totalTokenCount}, once
//     per model call;
//   - type "tool_result": message {role: "user", parts: [{functionResponse:
//     {id, name, response: {output} or {error}}}]} and toolCallResult
//     {callId, status};
//   - type "system" with a subtype (attribution_snapshot, ui_telemetry,
//     ...): bookkeeping inside the chain, walked through.
//
// A session forked with --resume ID --fork-session is a new file whose
// records are the origin's, with the same uuids and the new sessionId, each
// carrying forkedFrom {sessionId, messageUuid}; the importer stores it as
// a fork of its origin at the last copied message, whichever file it
// reads first. A session a fork of tine's ran in is written the same way.
//
// What tine makes of it: a message's NativeID is its record's uuid; a
// tool_result record is a model.Tool message; usage counts once per
// assistant record: input is the prompt's tokens less the cached ones,
// output the candidates' and the thoughts' tokens.
package qwen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// Harness is this backend's name in runs and the registry.
const Harness = "qwen"

// NPMPackage provides the qwen binary.
const NPMPackage = "@qwen-code/qwen-code"

// Dirs lists where Qwen Code keeps sessions: the projects folder of
// $QWEN_RUNTIME_DIR, then of $QWEN_HOME (else ~/.qwen).
func Dirs() []string { return dirsFrom(os.Getenv) }

// dirsFrom is Dirs for the environment getenv reads (a turn's, which may
// set its own HOME).
func dirsFrom(getenv func(string) string) []string {
	var dirs []string
	if d := getenv("QWEN_RUNTIME_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(expandHome(d, getenv), "projects"))
	}
	if h := qwenHome(getenv); h != "" {
		dirs = append(dirs, filepath.Join(h, "projects"))
	}
	return dirs
}

// qwenHome is Qwen Code's folder: $QWEN_HOME, else ~/.qwen.
func qwenHome(getenv func(string) string) string {
	if d := getenv("QWEN_HOME"); d != "" {
		return expandHome(d, getenv)
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".qwen")
}

// runtimeDir is where the sessions of a turn's qwen go:
// $QWEN_RUNTIME_DIR, else Qwen Code's folder.
func runtimeDir(getenv func(string) string) string {
	if d := getenv("QWEN_RUNTIME_DIR"); d != "" {
		return expandHome(d, getenv)
	}
	return qwenHome(getenv)
}

func expandHome(p string, getenv func(string) string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home := getenv("HOME"); home != "" {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// projectFolder is Qwen Code's folder name for a cwd's sessions: every
// character but an ASCII letter or digit as '-'.
func projectFolder(cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// chatsDir is the folder Qwen Code keeps cwd's sessions in.
func chatsDir(getenv func(string) string, cwd string) string {
	return filepath.Join(runtimeDir(getenv), "projects", projectFolder(cwd), "chats")
}

// realDir is dir with its symlinks resolved, as a process started in it
// sees its working directory (macOS's /var is /private/var); dir itself
// when that fails.
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

// Detect reports whether head, a file's first bytes, is a Qwen Code
// session: its first line is a JSON object with a uuid, a sessionId and
// either Qwen Code's message shape (message.parts) or its bookkeeping
// (provenance, systemPayload). Claude Code's records have a uuid and a
// sessionId too, but message.content, and neither of the others.
func Detect(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	line := head
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	var r struct {
		UUID       *string `json:"uuid"`
		SessionID  *string `json:"sessionId"`
		Provenance *string `json:"provenance"`
		Payload    any     `json:"systemPayload"`
		Message    *struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"message"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &r) != nil || r.UUID == nil || r.SessionID == nil {
		return false
	}
	return r.Provenance != nil || r.Payload != nil || (r.Message != nil && r.Message.Parts != nil)
}
