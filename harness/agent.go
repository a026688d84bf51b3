package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"tine/model"
)

// Agent is everything tine knows of one backend, said once, in the
// backend's own package: each exports one Agent, and the registry lists
// them. The command line, the screens, the importer and the replay ask
// the registry, never naming an agent (ARCHITECTURE.md, "One place per
// agent"). A piece a backend lacks is nil, with a sentence saying why.
type Agent struct {
	// Name is the backend's name in runs, --harness, --format and tine
	// harnesses.
	Name string
	// Display is its name as people know it ("Claude Code").
	Display string
	// Caps is what it can do (rule 8 in ARCHITECTURE.md): facts, never
	// guesses. A harness made from it may say more once it knows how it
	// is configured (Claude Code behind an ACP agent records).
	Caps Capabilities
	// New makes the harness, configured from the environment and setup.
	New func(Setup) Harness
	// Needs is what tine harnesses says it needs to run here.
	Needs []string

	// Sessions is how its transcripts are found and read; nil when tine
	// reads none of its own, NoSessions saying why.
	Sessions   *Sessions
	NoSessions string

	// CLI is the program its turns run; nil for a backend without one,
	// NoCLI saying why.
	CLI   *CLI
	NoCLI string

	// Open is the command line that opens run in the agent, for a person
	// to go on with it there (the TUI's o): bin is the agent's program,
	// found already; the run has a session id and a directory. Nil when a
	// run cannot be opened, NoOpen saying why.
	Open   func(run model.Run, bin string) ([]string, error)
	NoOpen string

	// Record is how its model calls are recorded and replayed through
	// tine's gateway; nil when they cannot be, NoRecord saying why.
	Record   *Recording
	NoRecord string

	// API is how a model API is configured; nil for anything else.
	API *API

	// Carry is how its turns run on another machine (a fork's
	// container); nil when they run only on this one, NoCarry saying why.
	Carry   *Carry
	NoCarry string
}

// Setup is what making a harness may take from tine beyond the
// environment.
type Setup struct {
	// BaseURL and APIKey override a model API's environment (--base-url
	// and --api-key, or what was typed in the Fork dialog).
	BaseURL, APIKey string
	// Paced slows the offline script harness so a person can watch its
	// forks run (the demo).
	Paced bool
	// Transport, when set, wraps the HTTP transport of a backend that
	// makes its model calls itself (the model APIs), to record them.
	Transport func(http.RoundTripper) http.RoundTripper
}

// Sessions is how a backend's transcripts are found and read.
type Sessions struct {
	// Dirs are where its sessions live by default; nil for none (a
	// format read only from paths given to tine import).
	Dirs func() []string
	// Files, when set, tells its session files in Dirs by their names;
	// nil: the files ending in .jsonl.
	Files func(name string) bool
	// Detect tells the format from a file's first bytes; the registry's
	// order is the order formats are tried in.
	Detect func(head []byte) bool
	// Parse reads one file into runs.
	Parse func(r io.Reader, name string) (ParsedFile, error)
	// ParseStream, when set, is Parse for a caller that stores the runs
	// and then closes the file parsed (ParsedFile.Close): a long file's
	// runs may come as Streams, their messages kept out of memory.
	ParseStream func(r io.Reader, name string) (ParsedFile, error)
	// Appends: the format is JSON lines an agent appends to, so a grown
	// file can be read from where the last import stopped.
	Appends bool
	// IDField and ParentField name a record's id and its parent's, for a
	// format whose records form a chain: new records continue the run
	// only when the first of them hangs off the last record read before.
	IDField, ParentField string
	// Header: the file's first line must lead any part of it to parse.
	Header bool
	// ParseTail, when set, parses a grown file's new part (r: the header
	// line when Header, then the bytes from off on) knowing the whole
	// file, for a format whose state carries across records (Codex's
	// usage totals and turns); else Parse does.
	ParseTail func(r io.Reader, name string, file io.ReaderAt, off int64) (ParsedFile, error)
	// Database, when set, says the agent keeps its sessions in one
	// database file, not a file each: the importer reads each session of
	// it as a source of its own, in the form Parse reads.
	Database *Database
}

// Database is an agent's database of sessions (opencode's SQLite file).
// The importer never writes it and holds no lock on it that the agent
// would wait for: the backend reads it read-only, one session at a time.
type Database struct {
	// Files are where the database is by default; nil for none.
	Files func() []string
	// Is reports whether the file at path, whose first bytes are head, is
	// such a database (a path given to tine import).
	Is func(path string, head []byte) bool
	// List lists the sessions of the database at path, each with a
	// fingerprint that changes whenever the session does (a new message
	// or part, an edit): an unchanged one is not read again.
	List func(ctx context.Context, path string) ([]Entry, error)
	// Read is session id of the database at path in the form Parse
	// reads, with whatever links it to other sessions.
	Read func(ctx context.Context, path, id string) ([]byte, error)
}

// Entry is one session of a Database.
type Entry struct {
	ID string
	// Fingerprint and Updated change whenever the session does.
	Fingerprint int64
	Updated     time.Time
}

// EntryPath is the source path of session id of the database at db: how
// its runs name where they came from.
func EntryPath(db, id string) string { return db + "#" + id }

// CLI is an agent's command-line program.
type CLI struct {
	// Bin is the program's name on PATH ("claude").
	Bin string
	// BinVar names another binary to use ("TINE_CLAUDE_BIN").
	BinVar string
	// Package is the npm package that provides it; Pin the version tine
	// was checked against (what `tine image build` installs).
	Package, Pin string
}

// Recording is how an agent's model calls go through tine's gateway
// (rule 9 in ARCHITECTURE.md), used when its harness's capabilities say
// Record.
type Recording struct {
	// Wire is the API its model calls speak, when that is fixed; "" when
	// it depends on the run (Upstream says).
	Wire Wire
	// Upstream is where run's model calls really go, and with which key,
	// as the agent's own configuration and environ say; its error says
	// why they cannot be recorded.
	Upstream func(run model.Run, environ []string) (Wire, Upstream, error)
	// NeedsTape: its transcript is tine's reading of a protocol, not a
	// file the agent wrote, so it replays only from a recorded tape.
	NeedsTape bool
	// OwnEntries: resuming a session checks its entries against the
	// run's messages by id, so a replay's trials keep their own copy of
	// the replayed steps instead of inheriting the recorded run's.
	OwnEntries bool
	// Normalize is what legitimately changes in its requests between a
	// recording and a replay, beyond what the wire format itself lets
	// change. It applies to its Wire, or to every wire when that depends
	// on the run.
	Normalize Normalization
	// LocalTools are its tools that act only on the working directory and
	// the processes they start there: a replay lets the agent run them
	// again for real. Any other tool (web, MCP, subagents, unknown) is
	// never run again.
	LocalTools []string
}

// Normalization is what an agent's model requests may differ in between a
// recording and a replay of the same run (rule 9 in ARCHITECTURE.md):
// what it states of the moment it runs in, rewritten the same way on both
// sides before they are compared.
type Normalization struct {
	// Cwd are regular expressions whose first group that matched is the
	// working directory the agent states; that path becomes "<cwd>"
	// wherever it appears.
	Cwd []string
	// MangledCwd: the agent also writes the working directory with every
	// character but ASCII letters and digits as '-' (a project folder's
	// name), which is replaced too.
	MangledCwd bool
	// Text rewrites every string of a request (a date, a git status).
	Text []Rewrite
	// ToolOutput rewrites tool outputs only (a header of timings).
	ToolOutput []Rewrite
	// Canonical, when set, rewrites a decoded request in place (a tree of
	// map[string]any, []any, string, json.Number, bool and nil), for what
	// no rewrite of strings can say: a list the agent builds in no fixed
	// order is put in one.
	Canonical func(request any)
}

// Rewrite replaces what Pattern (a regular expression) matches with With
// ($1 for a group), in strings that hold Has.
type Rewrite struct {
	Has, Pattern, With string
}

// API is how a model API harness is configured: the environment it reads.
type API struct {
	KeyEnv, URLEnv, ModelEnv string
	// DefaultURL is the vendor's own endpoint, which needs a key.
	DefaultURL string
}

// Upstream is where run's model calls really go, and with which key, as
// the agent's Recording says for environ; an agent whose calls cannot be
// recorded says why.
func (a Agent) Upstream(run model.Run, environ []string) (Wire, Upstream, error) {
	if a.Record == nil || a.Record.Upstream == nil {
		why := a.NoRecord
		if why == "" {
			why = "no gateway path for it"
		}
		return "", Upstream{}, fmt.Errorf("tine cannot record %s's model calls: %s", orName(a.Name), why)
	}
	return a.Record.Upstream(run, environ)
}

func orName(s string) string {
	if s == "" {
		return "this run's harness"
	}
	return s
}
