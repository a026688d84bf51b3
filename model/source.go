package model

import "time"

// Source is a transcript file on disk and how much of it was read.
type Source struct {
	Path   string
	Format string
	Size   int64
	MTime  time.Time
	// Offset is how many bytes were consumed; a grown file resumes there.
	Offset int64
	// Leaf is the id of the last chained record read (Claude's uuid, pi's
	// entry id): new records that continue from it extend the same run.
	Leaf string
}

// LinkKind says how a run relates to the session a Link names.
type LinkKind string

const (
	// LinkFork: the run was forked from the session (its prefix is the
	// session's first messages).
	LinkFork LinkKind = "fork"
	// LinkSubagent: the run is a subagent's transcript, started by a tool
	// call of the session.
	LinkSubagent LinkKind = "subagent"
)

// Link ties an imported run to another agent session, which may be
// imported before or after it.
type Link struct {
	Kind          LinkKind
	Harness       string
	ParentSession string // the other session's native id
	// For forks: the fork inherits the parent's messages through
	// AfterMessage (a native id), or those whose ordinal native id is below
	// BeforeOrdinal; its own first Inherited messages are copies of them.
	AfterMessage  string
	BeforeOrdinal int
	Inherited     int
	// For subagents: the call that started it.
	ToolCall string
}

// FileRun is one run read from a file, ready to store.
type FileRun struct {
	Run      Run
	Messages []Message
	// Stream, when set, holds the run's messages instead of Messages: a
	// long session's, read a chunk at a time as they are stored rather
	// than held in memory whole.
	Stream MessageStream
	// Parent is the index in the file's runs of the run this one branches
	// from (an in-file branch, at Run.ForkAt), or -1.
	Parent int
	Link   *Link
}

// Len is how many messages r holds.
func (r FileRun) Len() int {
	if r.Stream != nil {
		return r.Stream.Len()
	}
	return len(r.Messages)
}

// MessageStream gives a run's messages a range at a time.
type MessageStream interface {
	// Len is how many messages there are.
	Len() int
	// Messages returns messages from to to-1, any range in any order;
	// the slice is the caller's until the next call.
	Messages(from, to int) ([]Message, error)
}
