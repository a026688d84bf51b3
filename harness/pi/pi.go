// Package pi is the pi backend (@mariozechner/pi-coding-agent): it owns pi's
// session format, where pi keeps its sessions, how to read one into runs,
// and how to run a turn through the pi CLI (turn.go), with these command
// lines, verified with pi 0.73.1 (the prompt always on stdin):
//
//	new session   pi -p --mode json [--model M]
//	resume        pi -p --mode json [--model M] --session FILE
//	fork at end   pi -p --mode json [--model M] --fork ORIGIN_FILE
//	fork at K     a new session file holding the path to message K, then
//	              pi -p --mode json [--model M] --session THAT_FILE
//
// A pi session is one JSONL file: a header line
// {"type":"session","version":3,"id","timestamp","cwd","parentSession"?}
// then entries linked into a tree by id/parentId. pi's current position (its
// "leaf") is the last entry in the file; /tree moves it and a later append
// starts a branch inside the same file. `pi --fork` (and /fork) writes a new
// file whose header names the parent's file in parentSession and which
// starts with copies of the parent's entries, same ids and timestamps.
package pi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// Dirs lists the folders pi keeps sessions in, most specific first:
// $PI_CODING_AGENT_SESSION_DIR, the global settings' "sessionDir", then
// <agent dir>/sessions, where the agent dir is $PI_CODING_AGENT_DIR or
// ~/.pi/agent. Folders that do not exist are listed all the same; sessions
// sit in per-cwd subfolders (--<cwd with / as ->--) of the default one, and
// directly in a custom one.
func Dirs() []string { return dirsFrom(os.Getenv) }

// dirsFrom is Dirs for the environment getenv reads: a turn runs pi with an
// environment of its own (HOME, PI_CODING_AGENT_DIR), not tine's.
func dirsFrom(getenv func(string) string) []string {
	home := getenv("HOME")
	var dirs []string
	add := func(d string) {
		d = expandHome(d, home)
		if d == "" || !filepath.IsAbs(d) {
			return // relative to pi's cwd at the time: unknowable here
		}
		d = filepath.Clean(d)
		for _, have := range dirs {
			if have == d {
				return
			}
		}
		dirs = append(dirs, d)
	}
	agent := agentDir(getenv)
	add(getenv("PI_CODING_AGENT_SESSION_DIR"))
	if agent != "" {
		add(settingsSessionDir(filepath.Join(agent, "settings.json")))
		add(filepath.Join(agent, "sessions"))
	}
	return dirs
}

// agentDir is pi's agent folder: $PI_CODING_AGENT_DIR, else ~/.pi/agent.
func agentDir(getenv func(string) string) string {
	home := getenv("HOME")
	agent := expandHome(getenv("PI_CODING_AGENT_DIR"), home)
	if agent == "" && home != "" {
		agent = filepath.Join(home, ".pi", "agent")
	}
	return agent
}

// settingsSessionDir reads "sessionDir" from pi's global settings.json, "" if
// there is none. (A project's .pi/settings.json can set it too; that depends
// on the cwd pi ran in, so it is not looked at.)
func settingsSessionDir(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var s struct {
		SessionDir string `json:"sessionDir"`
	}
	if json.Unmarshal(data, &s) != nil {
		return ""
	}
	return s.SessionDir
}

// expandHome expands a leading ~ the way pi does ("~" and "~/...").
func expandHome(p, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/") && home != "":
		return filepath.Join(home, p[2:])
	}
	return p
}

// Detect reports whether head, the start of a file, looks like a pi session:
// its first line is a JSON object of type "session". The line is read as
// JSON, whatever its spacing and key order (pi writes "type" first, with
// no spaces); Codex's "session_meta" and Claude's records do not match. head
// may end mid-line: the type, once read, decides.
func Detect(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		if k == "type" {
			v, err := dec.Token()
			return err == nil && v == "session"
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
