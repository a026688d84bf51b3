package gemini

import (
	"cmp"
	"errors"

	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of Gemini CLI, in one place
// (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "Gemini CLI",
	// It forks at any checkpoint (a prefix file started with
	// --session-file), resumes, runs tools and streams; its model calls
	// go where GOOGLE_GEMINI_BASE_URL says, so tine can record them.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + NPMPackage + " (npm install -g " + NPMPackage + ")",
		"a model: GEMINI_API_KEY (GOOGLE_GEMINI_BASE_URL for another server, GEMINI_MODEL to pick one), or a Google login in ~/.gemini",
		"TINE_GEMINI_BIN to use another gemini binary",
	},
	Sessions: &harness.Sessions{Dirs: Dirs, Files: Files, Detect: Detect, Parse: Parse},
	CLI:      &harness.CLI{Bin: "gemini", BinVar: binVar, Package: NPMPackage, Pin: "0.61.0"},
	Carry:    carry,
	// gemini --resume ID, run in the session's directory (it looks for
	// the session in that directory's project folder only).
	Open: func(r model.Run, bin string) ([]string, error) { return []string{bin, "--resume", r.NativeID}, nil },
	Record: &harness.Recording{Wire: harness.WireGemini, Upstream: upstream,
		// As Gemini CLI 0.61.0's requests have them: the context block
		// of the first user message (today's date, the workspace
		// directory, and the project's temporary folder, which is named
		// after the directory, and also appears in the system prompt's
		// memory paths); in a shell's output, its process group; the
		// order of its skills.
		Normalize: harness.Normalization{
			Cwd: []string{
				`\*\*Workspace Directories:\*\*\n  - ([^\n]+)`,
				`The project's temporary directory is: ([^\n]+)`,
			},
			Text: []harness.Rewrite{
				{Has: "Today's date is ", Pattern: `Today's date is [^\n(]*`, With: "Today's date is <date> "},
			},
			ToolOutput: []harness.Rewrite{{Has: "Process Group PGID: ", Pattern: `(?m)^Process Group PGID: .*$`, With: "Process Group PGID: <pgid>"}},
			// The skills it found, listed in no fixed order.
			Canonical: canonical,
		},
		// Its tools that act on the working directory and the processes
		// they start there, or only on the conversation's own state.
		LocalTools: []string{"run_shell_command", "read_file", "read_many_files", "write_file", "replace", "glob",
			"grep_search", "search_file_content", "list_directory", "list_background_processes", "read_background_output",
			"write_todos", "update_topic", "enter_plan_mode", "exit_plan_mode"},
	},
}

// upstream is where Gemini CLI's model calls go: GOOGLE_GEMINI_BASE_URL,
// else Google's Gemini API, with GEMINI_API_KEY. A Google login's token
// (or Vertex AI's) cannot go through tine's gateway, so a key is
// required.
func upstream(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
	key := harness.Getenv(environ, "GEMINI_API_KEY")
	if key == "" {
		return "", harness.Upstream{}, errors.New("recording and replaying Gemini CLI need GEMINI_API_KEY (and GOOGLE_GEMINI_BASE_URL for another server): a Google login's token cannot go through tine's gateway")
	}
	return harness.WireGemini, harness.Upstream{BaseURL: cmp.Or(harness.Getenv(environ, "GOOGLE_GEMINI_BASE_URL"), "https://generativelanguage.googleapis.com"), APIKey: key}, nil
}

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
