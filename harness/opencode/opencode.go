// Package opencode is the opencode backend (opencode-ai): it reads
// opencode's sessions from its SQLite database and runs turns and forks
// through the opencode CLI (CLI, in turn.go). Everything tine knows of it
// is in its descriptor (Agent).
//
// The store, as opencode 1.18.33 keeps it (checked with the pinned CLI
// against the scripted model server): one SQLite database,
// $XDG_DATA_HOME/opencode/opencode.db (else ~/.local/share/opencode; or
// $OPENCODE_DB), in WAL mode. Its tables:
//
//   - session (id, parent_id, title, directory, time_created,
//     time_updated, ...): parent_id is set for a subagent's session (the
//     task tool), never for a fork;
//   - message (id, session_id, time_created, time_updated, data): data is
//     the message's JSON without its id: role, parentID (an assistant's
//     prompt), time {created, completed}, modelID, providerID, tokens
//     {input, output, reasoning, cache {read, write}}, cost, error;
//   - part (id, message_id, session_id, time_created, time_updated, data):
//     data's type is text {text, synthetic}, reasoning {text}, tool
//     {callID, tool, state {status, input, output, error}}, step-start,
//     step-finish {tokens, cost}, patch, file, snapshot, compaction,
//     agent, subtask.
//
// Message and part ids sort in the order they were made (an ascending
// time in hex, then random characters), which is the order opencode reads
// them in. Each assistant message is one model call: its tokens count
// once.
//
// The database is read read-only (mode=ro), one session a short
// transaction, so opencode, which writes it, never waits for tine. A
// session is read as the JSON `opencode export` writes ({info, messages:
// [{info, parts}]}), which export.Parse reads; such a file can be imported too.
//
// A fork that opencode made itself (`run --session ID --fork`, the
// server's POST /session/ID/fork) is a new session titled "<title> (fork
// #N)" with no parent_id, holding copies of the parent's messages under
// new ids: it is found by its title and the copied messages (the same
// roles, times and parts), and stored as a fork of its parent at the last
// copied message, whichever is read first.
//
// What tine makes of it: a message's NativeID is its opencode id; an
// assistant message whose tool parts hold results becomes an assistant
// message with the calls and a tool message with their results, the last
// of them carrying the opencode id (earlier ones the id and "#N").
package opencode

import (
	"tine/harness/opencode/export"

	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Harness is this backend's name in runs and the registry.
const Harness = export.Harness

// NPMPackage provides the opencode binary.
const NPMPackage = "opencode-ai"

// DBFiles lists where opencode keeps its database, as this environment
// says.
func DBFiles() []string { return []string{dbFile(os.Getenv)} }

// dbFile is opencode's database for the environment getenv reads:
// $OPENCODE_DB (a path, or a name in its data folder), else opencode.db
// in its data folder.
func dbFile(getenv func(string) string) string {
	if p := getenv("OPENCODE_DB"); p != "" {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dataDir(getenv), p)
	}
	return filepath.Join(dataDir(getenv), "opencode.db")
}

// dataDir is opencode's data folder: $XDG_DATA_HOME/opencode, else
// ~/.local/share/opencode.
func dataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "opencode")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "share", "opencode")
}

// stateDirs are the folders opencode writes its own state to (its data,
// cache, config and state folders), for a sandbox to leave writable.
func stateDirs(getenv func(string) string) []string {
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	or := func(v, def string) string {
		if d := getenv(v); d != "" {
			return filepath.Join(d, "opencode")
		}
		return filepath.Join(home, def, "opencode")
	}
	return []string{dataDir(getenv), or("XDG_CACHE_HOME", ".cache"), or("XDG_CONFIG_HOME", ".config"), or("XDG_STATE_HOME", filepath.Join(".local", "state"))}
}

// realDir is dir with its symlinks resolved, as a process started in it
// sees its working directory; dir itself when that fails.
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomTail is n random base62 characters, as opencode ends its ids.
func randomTail(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = base62[int(b[i])%len(base62)]
	}
	return string(b)
}

// newID is a new opencode id with prefix ("ses", "msg", "prt"): the time
// in hex (inverted for a session, so the newest sorts first, as opencode
// makes them) and 14 random characters.
func newID(prefix string, at time.Time) string {
	v := uint64(at.UnixMilli()) * 0x1000
	if prefix == "ses" {
		v = ^v
	}
	const hex = "0123456789abcdef"
	var h [12]byte
	for i := 11; i >= 0; i-- {
		h[i] = hex[v&0xf]
		v >>= 4
	}
	return prefix + "_" + string(h[:]) + randomTail(14)
}

// copyID is a new id that sorts where id does: id's prefix and time, a
// new random tail.
func copyID(id string) string {
	i := strings.IndexByte(id, '_')
	if i < 0 || len(id) < i+1+12 {
		return newID("prt", time.Now())
	}
	return id[:i+1+12] + randomTail(14)
}
