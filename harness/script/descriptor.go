package script

import (
	"time"

	"tine/harness"
)

// Agent is everything tine knows of the script harness, in one place
// (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    "script",
	Display: "script (offline)",
	// It can do everything, offline and deterministic.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true},
	New: func(s harness.Setup) harness.Harness {
		h := &Harness{}
		if s.Paced {
			h.Delay = 400 * time.Millisecond
		}
		return h
	},
	Needs:      []string{"nothing: offline and deterministic"},
	NoSessions: "its runs are tine's own",
	NoCLI:      "built into tine",
	NoOpen:     "a script run is tine's offline harness: there is no agent to open it in",
	NoCarry:    "the offline script harness runs in tine itself",
	NoRecord:   "it makes no model calls",
}

// Descriptor implements harness.Described.
func (*Harness) Descriptor() harness.Agent { return Agent }
