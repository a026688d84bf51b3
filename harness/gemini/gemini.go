// Package gemini is the Gemini CLI backend (@google/gemini-cli): it owns
// Gemini CLI's session files (where they live, how to tell one, how to
// read one into runs) and runs turns and forks through the gemini CLI
// (CLI, in turn.go). Everything tine knows of it is in its descriptor
// (Agent).
//
// The format, as Gemini CLI 0.61.0 writes it (checked with the pinned CLI,
// and 0.30.0 for the older form, against the scripted model server with a
// private HOME): JSON lines in <home>/.gemini/tmp/<project>/chats/, the
// home being $GEMINI_CLI_HOME, else $HOME. <project> is a name Gemini CLI
// gives the directory in ~/.gemini/projects.json (its base name, made
// unique: repo, repo-1), whose .project_root file names the directory;
// older versions named the folder after the directory's SHA-256 (a later
// one copies it to the new name and leaves it). A new session is
// session-<YYYY-MM-DDTHH-MM>-<first 8 of its id>.jsonl; a subagent's is
// chats/<parent session id>/<id>.jsonl (kind "subagent"). Records:
//
//   - a header {sessionId, projectHash (the directory's SHA-256),
//     startTime, lastUpdated, kind};
//   - messages {id, timestamp, type: user, gemini, info, error or warning,
//     content (a string or Gemini API parts), thoughts [{subject,
//     description}], tokens {input (the prompt's, cached included),
//     output, cached, thoughts, tool, total}, model, toolCalls [{id, name,
//     args, result (functionResponse parts), status}]}. A record is
//     written again, the same id, when it grows (an answer's calls and
//     their results are added once they ran): the last one wins, in the
//     first one's place. 0.61.0 also writes a call's results as a user
//     record of their own; 0.30.0 kept them in toolCalls[].result only;
//   - {"$set": {...}} rewrites fields (lastUpdated, sessionId, summary),
//     or, with messages, the whole list;
//   - {"$rewindTo": id} drops that message and the ones after it.
//
// A session's first message is Gemini CLI's own context (<session_context>:
// the date, the system, the project's temporary folder, the workspace
// directories and a listing of them), always with the same id; a resumed
// conversation leaves it out and puts a fresh one first. A resume
// (--resume ID) rewrites the messages with a $set: the earlier answers
// without their tokens and model, each call's results once more as a
// record "<answer id>_response" (the model is then sent them twice); it
// also starts an empty file session-<now>-<id8>.jsonl holding only the
// context, which, in the minute the session began, is the session's own
// file: a second header and the messages emptied, then set whole again.
// gemini --session-file FILE (FILE untouched) starts a new session,
// session-<epoch ms>-<id8>.jsonl: FILE's header, an info record
// "Imported session from FILE", copies of FILE's user and gemini
// messages with their ids, then a $set of the new sessionId. Before JSON
// lines (0.30.0), a session was one object, session-<date>-<id8>.json,
// JSON.stringify(conversation, null, 2) {sessionId, projectHash,
// startTime, lastUpdated, messages}, rewritten whole; 0.61.0 resumes one
// by writing <same name>.jsonl (its header and messages, then new ones)
// beside it. Tool call ids are kept as "<tool name>__<id>" and sent
// without the prefix; a model that gives none gets "synth_..." ids.
//
// What tine makes of it: the main line is the messages as Gemini CLI
// would resume them, their record ids as NativeIDs; messages a rewind or
// a rewrite dropped stay, as in-file branches; a record written again
// keeps the usage and model it said first (usage counts once per model
// call: input less the cached tokens plus the tool prompt's, output with
// the thoughts'); a call's results are the record Gemini CLI wrote for
// them, or, when it wrote none, a tool message "<answer id>_response";
// a result told twice is shown once; the context block is a system
// message; tool call ids are the model's, without the prefix. A file that
// holds nothing but the context is no session. The project root is the
// workspace the context names, or the folder's .project_root, whichever
// hashes to projectHash. A copy (--session-file) is a fork of the session
// in FILE (read there, or, FILE gone, the session id FILE is named after,
// as tine names its prefix files) after its last copied message, and a
// converted legacy file a fork of the .json it came from, whichever file
// the importer reads first.
package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// Harness is this backend's name in runs and the registry.
const Harness = "gemini"

// NPMPackage provides the gemini binary.
const NPMPackage = "@google/gemini-cli"

// Dirs lists where Gemini CLI keeps sessions: the tmp folder of its home
// (~/.gemini, or $GEMINI_CLI_HOME/.gemini), one folder per project.
func Dirs() []string { return dirsFrom(os.Getenv) }

func dirsFrom(getenv func(string) string) []string {
	if d := geminiDir(getenv); d != "" {
		return []string{filepath.Join(d, "tmp")}
	}
	return nil
}

// geminiDir is Gemini CLI's folder: .gemini in $GEMINI_CLI_HOME, else in
// the home folder.
func geminiDir(getenv func(string) string) string {
	home := getenv("GEMINI_CLI_HOME")
	if home == "" {
		home = getenv("HOME")
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".gemini")
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

// Files tells a session file in Dirs by its name: JSON lines (*.jsonl),
// and the session-*.json files Gemini CLI wrote before them.
func Files(name string) bool {
	name = strings.ToLower(name)
	return strings.HasSuffix(name, ".jsonl") || strings.HasPrefix(name, "session-") && strings.HasSuffix(name, ".json")
}

// Detect reports whether head, a file's first bytes, is a Gemini CLI
// session: it begins with the session's header, an object whose first
// keys include sessionId and projectHash (a JSON-lines file's first line,
// or a legacy file's one object).
func Detect(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	var id, hash bool
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			break // cut off by the head's end
		}
		var s string
		switch k {
		case "sessionId":
			id = json.Unmarshal(v, &s) == nil && s != ""
		case "projectHash":
			hash = json.Unmarshal(v, &s) == nil && s != ""
		}
		if id && hash {
			return true
		}
	}
	return false
}
