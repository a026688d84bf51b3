package codex

import (
	"cmp"
	"errors"
	"fmt"

	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of Codex, in one place (ARCHITECTURE.md,
// "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "Codex",
	// It forks natively (exec fork at the end, and at any checkpoint
	// through a rollout holding the prefix), resumes, runs tools and
	// streams; its provider's base URL can be overridden, so tine records.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + NPMPackage + " (npm install -g " + NPMPackage + ")",
		"OPENAI_API_KEY, or a Codex login (codex login), or a model provider in $CODEX_HOME/config.toml",
		"TINE_CODEX_BIN to use another codex binary",
	},
	Sessions: &harness.Sessions{Dirs: Dirs, Detect: Detect, Parse: Parse, ParseTail: ParseTail, Appends: true, Header: true},
	CLI:      &harness.CLI{Bin: "codex", BinVar: binVar, Package: NPMPackage, Pin: "0.169.0"},
	Carry:    carry,
	// codex resume ID, as checked against the pinned CLI.
	Open: func(r model.Run, bin string) ([]string, error) { return []string{bin, "resume", r.NativeID}, nil },
	Record: &harness.Recording{Wire: harness.WireResponses, Upstream: upstream,
		// As Codex 0.169.0's requests have it: the environment context's
		// cwd and date; the header lines it adds to a tool's output,
		// "Chunk ID: ..." (random) and "Wall time: ... seconds", keep
		// their names only.
		Normalize: harness.Normalization{
			Cwd:  []string{`<cwd>([^<]+)</cwd>`},
			Text: []harness.Rewrite{{Has: "<current_date>", Pattern: `<current_date>[^<]*</current_date>`, With: "<current_date><date></current_date>"}},
			ToolOutput: []harness.Rewrite{
				{Has: "Chunk ID: ", Pattern: `(?m)^Chunk ID: \S+$`, With: "Chunk ID: <chunk>"},
				{Has: "Wall time: ", Pattern: `(?m)^Wall time: [0-9.]+ seconds$`, With: "Wall time: <time> seconds"},
			},
		},
		LocalTools: []string{"exec_command", "write_stdin", "shell", "shell_command", "local_shell", "apply_patch",
			"update_plan", "view_image"},
	},
}

// binVar names another codex binary.
const binVar = "TINE_CODEX_BIN"

// upstream is where Codex's model calls really go: its provider in
// config.toml (the built-in one: OPENAI_BASE_URL, else OpenAI's API, with
// OPENAI_API_KEY). A ChatGPT login's token cannot go through the gateway,
// so a key is required.
func upstream(_ model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
	p := ProviderFrom(environ)
	if p.Name == "openai" {
		key := harness.Getenv(environ, "OPENAI_API_KEY")
		if key == "" {
			return "", harness.Upstream{}, errors.New("recording and replaying Codex need OPENAI_API_KEY: a ChatGPT login's token cannot go through tine's gateway")
		}
		return harness.WireResponses, harness.Upstream{BaseURL: cmp.Or(p.BaseURL, harness.Getenv(environ, "OPENAI_BASE_URL"), "https://api.openai.com/v1"), APIKey: key}, nil
	}
	if p.BaseURL == "" {
		return "", harness.Upstream{}, fmt.Errorf("codex's model provider %q has no base_url in config.toml", p.Name)
	}
	key := ""
	if p.KeyEnv != "" {
		if key = harness.Getenv(environ, p.KeyEnv); key == "" {
			return "", harness.Upstream{}, fmt.Errorf("codex's model provider %q takes its key from %s, which is not set", p.Name, p.KeyEnv)
		}
	}
	return harness.WireResponses, harness.Upstream{BaseURL: p.BaseURL, APIKey: key}, nil
}

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
