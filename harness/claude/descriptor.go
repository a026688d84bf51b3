package claude

import (
	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of Claude Code, in one place
// (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "Claude Code",
	// It forks natively (--fork-session), at any checkpoint
	// (--resume-session-at), resumes, runs tools and streams; its model
	// calls go where ANTHROPIC_BASE_URL says, so tine can record them.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + NPMPackage + " (npm install -g " + NPMPackage + ")",
		"ANTHROPIC_API_KEY, or a Claude login (claude auth login)",
		"TINE_CLAUDE_BIN to use another claude binary",
	},
	Sessions: &harness.Sessions{Dirs: Dirs, Detect: Detect, Parse: Parse, Appends: true,
		IDField: "uuid", ParentField: "parentUuid"},
	CLI: &harness.CLI{Bin: "claude", BinVar: binVar, Package: NPMPackage},
	// claude --resume ID, as checked against the pinned CLI.
	Open: func(r model.Run, bin string) ([]string, error) { return []string{bin, "--resume", r.NativeID}, nil },
	Record: &harness.Recording{Wire: harness.WireAnthropic,
		Upstream: func(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
			return harness.AnthropicUpstream(environ)
		}},
}

// binVar names another claude binary.
const binVar = "TINE_CLAUDE_BIN"

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
