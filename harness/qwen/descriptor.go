package qwen

import (
	"cmp"
	"errors"

	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of Qwen Code, in one place
// (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "Qwen Code",
	// It forks at any checkpoint (a branch file, as --fork-session writes
	// one), resumes, runs tools and streams; its model calls go where
	// OPENAI_BASE_URL says, so tine can record them.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + NPMPackage + " (npm install -g " + NPMPackage + ")",
		"a model: OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL with an OpenAI-compatible server (or a Qwen login in ~/.qwen)",
		"TINE_QWEN_BIN to use another qwen binary",
	},
	Sessions: &harness.Sessions{Dirs: Dirs, Detect: Detect, Parse: Parse, Appends: true,
		IDField: "uuid", ParentField: "parentUuid"},
	CLI:   &harness.CLI{Bin: "qwen", BinVar: binVar, Package: NPMPackage, Pin: "0.24.4"},
	Carry: carry,
	// qwen --resume ID, run in the session's directory (it looks for the
	// session in that directory's project folder only).
	Open: func(r model.Run, bin string) ([]string, error) { return []string{bin, "--resume", r.NativeID}, nil },
	Record: &harness.Recording{Wire: harness.WireChat, Upstream: upstream,
		// As Qwen Code 0.24.4's requests have them: the environment
		// context's working directory, today's date twice, and the git
		// snapshot (branch, status, recent commits) taken at the start;
		// in a shell's output, its process group.
		Normalize: harness.Normalization{
			Cwd: []string{`I'm currently working in the directory: ([^\n]+)`},
			Text: []harness.Rewrite{
				{Has: "Today's date is ", Pattern: `Today's date is [^\n]*?\.(\n|$)`, With: "Today's date is <date>.${1}"},
				{Has: "The current date is: ", Pattern: `The current date is: [^\n.]*\.`, With: "The current date is: <date>."},
				{Has: "Git snapshot at conversation start", Pattern: "(?s)(Git snapshot at conversation start[^\n]*\n```text\n).*?(\n```)", With: "${1}<gitStatus>${2}"},
			},
			// The shell tool's output names the process group it ran in.
			ToolOutput: []harness.Rewrite{{Has: "Process Group PGID: ", Pattern: `(?m)^Process Group PGID: .*$`, With: "Process Group PGID: <pgid>"}},
		},
		LocalTools: []string{"run_shell_command", "read_file", "write_file", "edit", "glob", "grep_search", "notebook_edit",
			"list_directory", "read_many_files", "todo_write", "exit_plan_mode", "enter_plan_mode"},
	},
}

// upstream is where Qwen Code's model calls go when it speaks the OpenAI
// API: OPENAI_BASE_URL with OPENAI_API_KEY. A Qwen login's token cannot
// go through tine's gateway, so a key is required.
func upstream(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
	key := harness.Getenv(environ, "OPENAI_API_KEY")
	if key == "" {
		return "", harness.Upstream{}, errors.New("recording and replaying Qwen Code need OPENAI_API_KEY (and OPENAI_BASE_URL): a Qwen login's token cannot go through tine's gateway")
	}
	return harness.WireChat, harness.Upstream{BaseURL: cmp.Or(harness.Getenv(environ, "OPENAI_BASE_URL"), "https://api.openai.com/v1"), APIKey: key}, nil
}

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
