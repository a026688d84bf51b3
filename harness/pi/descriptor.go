package pi

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"tine/harness"
	"tine/model"
)

// Agent is everything tine knows of pi, in one place (ARCHITECTURE.md,
// "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "pi",
	// It forks natively (--fork, and at any checkpoint a session file
	// holding the path to K), resumes, runs tools and streams; its
	// providers can be routed through a proxy, so tine records.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + Package + " (the pi CLI; TINE_PI_BIN names another binary)",
		"a provider in ~/.pi/agent/models.json (baseUrl, api, apiKey, models), or a provider's API key in the environment",
		"--permissions auto: pi runs its tools without asking and has no permission prompts, so ask is refused",
	},
	Sessions: &harness.Sessions{Dirs: Dirs, Detect: Detect, Parse: Parse, Appends: true,
		IDField: "id", ParentField: "parentId", Header: true},
	CLI:   &harness.CLI{Bin: "pi", BinVar: binVar, Package: Package, Pin: "0.73.1"},
	Carry: carry,
	Open: func(r model.Run, bin string) ([]string, error) {
		file, err := openFile(r, os.Getenv)
		if err != nil {
			return nil, err
		}
		// pi names sessions by file: an id is looked up in the cwd's
		// folder only.
		return []string{bin, "--session", file}, nil
	},
	// The wire is the run's provider's (Upstream says); resuming checks
	// the session's entries by id against the run's messages.
	Record: &harness.Recording{Upstream: upstream, OwnEntries: true,
		// As pi 0.73.1's system prompt states them, whichever wire its
		// provider speaks.
		Normalize: harness.Normalization{
			Cwd:  []string{`Current working directory: ([^\n]+)`},
			Text: []harness.Rewrite{{Has: "Current date: ", Pattern: `Current date: [^\n]*`, With: "Current date: <date>"}},
		},
		LocalTools: []string{"bash", "read", "write", "edit", "ls", "grep", "find"},
	},
}

// binVar names another pi binary.
const binVar = "TINE_PI_BIN"

// upstream is where pi's model calls really go, as the provider of the
// run's model in its models.json (or a built-in provider) says.
func upstream(run model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
	pr, err := ProviderFor(environ, run.Model)
	if err != nil {
		return "", harness.Upstream{}, err
	}
	wire, ok := map[string]harness.Wire{"openai-completions": harness.WireChat, "openai-responses": harness.WireResponses,
		"anthropic-messages": harness.WireAnthropic}[pr.API]
	if !ok {
		return "", harness.Upstream{}, fmt.Errorf("pi's provider %q speaks %q, which tine's gateway does not", pr.Name, pr.API)
	}
	return wire, harness.Upstream{BaseURL: pr.BaseURL, APIKey: pr.Key}, nil
}

// openFile finds pi's file of run r's session: the file it was imported
// from when that is the session's (pi names files <time>_<id>.jsonl),
// else the session's file where pi keeps sessions for getenv.
func openFile(r model.Run, getenv func(string) string) (string, error) {
	if strings.ContainsAny(r.NativeID, `*?[]/\`) {
		return "", fmt.Errorf("%q is not a pi session id", model.SafeText(r.NativeID))
	}
	if r.Source != "" && strings.HasSuffix(r.Source, "_"+r.NativeID+".jsonl") {
		if st, err := os.Stat(r.Source); err == nil && st.Mode().IsRegular() {
			return r.Source, nil
		}
	}
	file, err := findSession(getenv, r.NativeID, cmp.Or(r.Worktree, r.Cwd))
	if err != nil {
		return "", fmt.Errorf("pi's session file for %s is missing: %w", model.ShortID(r.NativeID), err)
	}
	return file, nil
}

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }
