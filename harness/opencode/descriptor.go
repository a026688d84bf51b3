package opencode

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"tine/harness"
	"tine/harness/opencode/export"
	"tine/model"
)

// Agent is everything tine knows of opencode, in one place
// (ARCHITECTURE.md, "One place per agent").
var Agent = harness.Agent{
	Name:    Harness,
	Display: "opencode",
	// It forks at any checkpoint (a prefix written as a new session, as
	// `opencode import` takes one), resumes, runs tools and streams its
	// events; its model calls go to its provider's baseURL, so tine can
	// record those of an OpenAI-compatible provider.
	Caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true},
	New:  func(harness.Setup) harness.Harness { return New(ConfigFromEnv()) },
	Needs: []string{
		"npm package " + NPMPackage + " (npm install -g " + NPMPackage + ")",
		"a model: a provider in ~/.config/opencode/opencode.json or OPENCODE_CONFIG_CONTENT (an OpenAI-compatible one, with baseURL and apiKey, to record)",
		"TINE_OPENCODE_BIN to use another opencode binary",
	},
	Sessions: &harness.Sessions{Detect: export.Detect, Parse: export.Parse,
		Database: &harness.Database{Files: DBFiles, Is: IsDB, List: List, Read: Read}},
	CLI:   &harness.CLI{Bin: "opencode", BinVar: binVar, Package: NPMPackage, Pin: "1.18.33"},
	Carry: carry,
	// opencode --session ID, run in the session's directory: its TUI on
	// that session.
	Open: func(r model.Run, bin string) ([]string, error) { return []string{bin, "--session", r.NativeID}, nil },
	Record: &harness.Recording{Wire: harness.WireChat, Upstream: upstream,
		// As opencode 1.18.33's requests have them: its environment
		// block's working directory, workspace root and date, and, in
		// its shell tool's description, its temporary folder ($TMPDIR's,
		// which a replay's sandbox gives it anew).
		Normalize: harness.Normalization{
			Cwd: []string{`Working directory: ([^\n]+)`, `Workspace root folder: ([^\n]+)`},
			Text: []harness.Rewrite{
				{Has: "Today's date: ", Pattern: `Today's date: [^\n]*`, With: "Today's date: <date>"},
				{Has: "for temporary work outside the workspace", Pattern: "Use `[^`\n]*` for temporary work", With: "Use `<tmp>` for temporary work"},
			},
		},
		LocalTools: []string{"bash", "read", "write", "edit", "multiedit", "patch", "apply_patch", "glob", "grep", "list", "todowrite", "todoread"},
	},
}

// providerConf is a provider of opencode's config, as far as tine reads it.
type providerConf struct {
	NPM     string `json:"npm"`
	Options struct {
		BaseURL string `json:"baseURL"`
		APIKey  string `json:"apiKey"`
	} `json:"options"`
	Models map[string]json.RawMessage `json:"models"`
}

type configFile struct {
	Model    string                  `json:"model"`
	Provider map[string]providerConf `json:"provider"`
}

// configs are opencode's configs as environ has them, the one that wins
// first: OPENCODE_CONFIG_CONTENT, OPENCODE_CONFIG, the global config.
func configs(environ []string) []configFile {
	getenv := func(k string) string { return harness.Getenv(environ, k) }
	var out []configFile
	add := func(b []byte) {
		var c configFile
		if json.Unmarshal(stripComments(b), &c) == nil {
			out = append(out, c)
		}
	}
	if c := getenv(configVar); c != "" {
		add([]byte(c))
	}
	if p := getenv("OPENCODE_CONFIG"); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			add(b)
		}
	}
	home := getenv("HOME")
	cfg := filepath.Join(home, ".config")
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		cfg = d
	}
	for _, name := range []string{"opencode.json", "opencode.jsonc", "config.json"} {
		if b, err := os.ReadFile(filepath.Join(cfg, "opencode", name)); err == nil {
			add(b)
		}
	}
	return out
}

var lineComment = regexp.MustCompile(`(?m)^\s*//.*$`)

// stripComments drops whole-line // comments (a .jsonc).
func stripComments(b []byte) []byte { return lineComment.ReplaceAll(b, nil) }

// providerFor finds the provider of modelID ("provider/model" or a
// model's id) in the configs: its name and settings, merged across them.
func providerFor(environ []string, modelID string) (string, providerConf, error) {
	cs := configs(environ)
	name := ""
	if p, _, ok := strings.Cut(modelID, "/"); ok {
		name = p
	}
	if name == "" {
		for _, c := range cs {
			for n, p := range c.Provider {
				if _, ok := p.Models[modelID]; ok && name == "" {
					name = n
				}
			}
		}
	}
	if name == "" {
		for _, c := range cs {
			if p, _, ok := strings.Cut(c.Model, "/"); ok && name == "" {
				name = p
			}
		}
	}
	if name == "" {
		return "", providerConf{}, errors.New("no provider of opencode's config names the model")
	}
	var got providerConf
	for i := len(cs) - 1; i >= 0; i-- { // the first wins
		p, ok := cs[i].Provider[name]
		if !ok {
			continue
		}
		got.NPM = cmp.Or(p.NPM, got.NPM)
		got.Options.BaseURL = cmp.Or(p.Options.BaseURL, got.Options.BaseURL)
		got.Options.APIKey = cmp.Or(p.Options.APIKey, got.Options.APIKey)
	}
	return name, got, nil
}

// envRef is opencode's {env:VAR} in a config value.
var envRef = regexp.MustCompile(`^\{env:([A-Za-z_][A-Za-z0-9_]*)\}$`)

// upstream is where opencode's model calls go for run: its provider's
// baseURL with its apiKey (or the variable it names), when the provider
// speaks the OpenAI Chat Completions API.
func upstream(run model.Run, environ []string) (harness.Wire, harness.Upstream, error) {
	name, p, err := providerFor(environ, run.Model)
	if err != nil {
		return "", harness.Upstream{}, fmt.Errorf("recording and replaying opencode need an OpenAI-compatible provider in its config: %w", err)
	}
	if p.NPM != "" && p.NPM != "@ai-sdk/openai-compatible" && p.NPM != "@ai-sdk/openai" {
		return "", harness.Upstream{}, fmt.Errorf("opencode's provider %s speaks %s; tine records only an OpenAI-compatible one (@ai-sdk/openai-compatible)", name, p.NPM)
	}
	if p.Options.BaseURL == "" {
		return "", harness.Upstream{}, fmt.Errorf("opencode's provider %s has no options.baseURL to record through", name)
	}
	key := p.Options.APIKey
	if m := envRef.FindStringSubmatch(key); m != nil {
		key = harness.Getenv(environ, m[1])
	}
	if key == "" {
		return "", harness.Upstream{}, fmt.Errorf("opencode's provider %s has no apiKey to record with", name)
	}
	return harness.WireChat, harness.Upstream{BaseURL: p.Options.BaseURL, APIKey: key}, nil
}

// gatewayProvider is the provider a turn's model calls go through, which
// a recording points at tine's gateway.
func gatewayProvider(environ []string, req harness.TurnRequest) (string, error) {
	name, _, err := providerFor(environ, cmp.Or(req.Model, req.Run.Model))
	if err != nil {
		return "", fmt.Errorf("opencode: to record, %w", err)
	}
	return name, nil
}
