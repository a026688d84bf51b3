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
	Sessions: &harness.Sessions{Dirs: Dirs, Detect: Detect, Parse: Parse, ParseStream: ParseStream, Appends: true,
		IDField: "uuid", ParentField: "parentUuid"},
	CLI: &harness.CLI{Bin: "claude", BinVar: binVar, Package: NPMPackage, Pin: "2.1.328"},
	// claude --resume ID, as checked against the pinned CLI.
	Open:  func(r model.Run, bin string) ([]string, error) { return []string{bin, "--resume", r.NativeID}, nil },
	Carry: carry,
	Record: &harness.Recording{Wire: harness.WireAnthropic,
		Upstream: func(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
			return harness.AnthropicUpstream(environ)
		},
		// As Claude Code 2.1.328's requests have it (checked by replay's
		// tests with the real CLI): the environment block names the
		// working directory (also in the "# Environment update" a session
		// resumed elsewhere gets: "<new> (was <old>)"), and its project
		// folder's mangled form; the gitStatus snapshot and the date.
		Normalize: harness.Normalization{
			Cwd:        []string{`Primary working directory: ([^\n]+?)(?: \(was [^\n]*\))?(?:\n|$)`},
			MangledCwd: true,
			Text: []harness.Rewrite{
				{Has: "# gitStatus", Pattern: `(?s)(# gitStatus\n).*?(\n\nClaude Code attached this context|</system-reminder>|$)`, With: "${1}<gitStatus>${2}"},
				{Has: "Today's date is ", Pattern: `Today's date is [^\n]*?\.(\n|$)`, With: "Today's date is <date>.${1}"},
			},
			// On a model with the total_tokens_reminder capability
			// (claude-sonnet-4-5, not the default model), Claude Code
			// appends "\n\n<system-reminder>\n<total_tokens>N tokens
			// left</total_tokens>\n</system-reminder>" to every tool
			// result it sends: N counts down differently in a replay, and
			// the transcript's tool result never holds the note. Exactly
			// that note goes, nothing else.
			ToolOutput: []harness.Rewrite{
				{Has: " tokens left</total_tokens>", Pattern: `(?:\n\n)?<system-reminder>\n<total_tokens>(?:\d+|Infinite) tokens left</total_tokens>\n</system-reminder>`},
			},
		},
		LocalTools: []string{"Bash", "BashOutput", "KillShell", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit",
			"Glob", "Grep", "LS", "TodoWrite", "ExitPlanMode"},
	},
}

// binVar names another claude binary.
const binVar = "TINE_CLAUDE_BIN"

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
