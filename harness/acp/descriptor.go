package acp

import (
	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of an Agent Client Protocol agent, in one
// place (ARCHITECTURE.md, "One place per agent"). Which agent it is comes
// from TINE_ACP_AGENT; its harness says more once it knows (Capabilities).
var Agent = harness.Agent{
	Name:    Name,
	Display: "ACP agent",
	// It forks natively with session/fork, at a session's end only;
	// resumes, runs tools and streams. Whether its model calls can be
	// recorded depends on the agent (Claude Code behind ACP can).
	Caps:       harness.Capabilities{Fork: true, ForkAtK: false, Resume: true, Tools: true, Stream: true, OwnSessions: true},
	New:        func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs:      []string{needs},
	NoSessions: "an ACP agent keeps its sessions itself; tine knows the ones it drove, over ACP",
	NoCLI:      "an ACP agent is whatever command TINE_ACP_AGENT names, spoken to over stdio",
	NoOpen:     "an ACP agent's session is reached over ACP only: it has no command line to open it in a terminal",
	NoCarry:    "an ACP agent is whatever program TINE_ACP_AGENT names: tine does not know what of this machine it needs elsewhere, so its forks run here",
	// Used when the harness says Record: Claude Code behind ACP takes
	// Claude Code's environment. tine writes an ACP run's transcript from
	// ACP's updates, not from a file the agent wrote, so only a recorded
	// tape replays it.
	Record: &harness.Recording{Wire: harness.WireAnthropic, NeedsTape: true,
		Upstream: func(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
			return harness.AnthropicUpstream(environ)
		}},
}

// Descriptor implements harness.Described.
func (*Harness) Descriptor() harness.Agent { return Agent }
