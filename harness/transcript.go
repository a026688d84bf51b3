package harness

import (
	"fmt"
	"io"

	"tine/model"
)

// Transcript is one run read from a file by a backend's parser, ready to store.
type Transcript struct {
	Run      model.Run
	Messages []model.Message
	// Skipped lists what the parser could not read; the rest was kept.
	Skipped []Skip
}

// Skip is one record a parser skipped, and why.
type Skip struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
	// MissingParent, for a format whose records chain by id, is the
	// parent a record names that is not in what was read: in a whole
	// file, a record lost; in a grown file's new part, read from where
	// the last import stopped, the last record read before, which is no
	// skip at all (the importer tells which).
	MissingParent string `json:"-"`
}

func (s Skip) String() string { return fmt.Sprintf("%s:%d: %s", s.File, s.Line, s.Reason) }

// ParsedFile is what a backend reads from one transcript file on disk.
type ParsedFile struct {
	// Runs are the file's runs: its main line first, then any in-file
	// branches (a rewind that made a second child of an earlier record).
	Runs    []ParsedRun
	Skipped []Skip
	// Offset is how many bytes of the file were consumed: a partial last
	// line (the agent is still writing) is left for the next import.
	Offset int64
	// Held, when set, is what the runs' Streams read from (a long
	// session's messages kept out of memory, Sessions.ParseStream): close
	// it once they are stored.
	Held io.Closer
}

// Close lets go of what the runs' Streams read from, if anything.
func (f ParsedFile) Close() error {
	if f.Held == nil {
		return nil
	}
	return f.Held.Close()
}

// ParsedRun is one run of a parsed file, with what links it to others.
type ParsedRun struct {
	Transcript
	// Parent is the index in ParsedFile.Runs of the run this in-file branch
	// leaves, -1 for the main line; ForkAt is the boundary it leaves at, and
	// Messages then holds only the branch's own messages.
	Parent int
	ForkAt int
	// Fork, when set, says this file was forked from another session (Claude
	// --fork-session, Codex forked_from_id, pi parentSession).
	Fork *ForkHint
	// Subagent, when set, says this run is a subagent's transcript (a Claude
	// sidechain) started by a tool call of another session.
	Subagent *SubagentHint
	// Stream, when set, holds the run's messages instead of Messages
	// (Sessions.ParseStream, for a long file).
	Stream model.MessageStream
}

// Len is how many messages the run holds.
func (r ParsedRun) Len() int {
	if r.Stream != nil {
		return r.Stream.Len()
	}
	return len(r.Messages)
}

// SubagentHint names the tool call that started a subagent's run.
type SubagentHint struct {
	ParentSession string // the native session id of the run that made the call
	ToolCallID    string // the call (e.g. Claude's Task tool_use id), "" if unknown
}

// ForkHint names where a file's run was forked from, so the importer can
// store it as a fork of that run, sharing the prefix, whichever file it
// reads first.
type ForkHint struct {
	// ParentSession is the parent's native session id.
	ParentSession string
	// Inherited is how many leading Messages are copies of the parent's
	// (Claude and pi copy history into the fork's file; Codex does not: 0).
	Inherited int
	// AfterMessage is the NativeID of the parent's last inherited message,
	// when known; BeforeOrdinal (Codex) instead says the fork inherits the
	// parent's messages whose NativeID, an ordinal, is below it.
	AfterMessage  string
	BeforeOrdinal int
}
