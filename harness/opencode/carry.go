package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"tine/harness"
	"tine/internal/agentproc"
)

// carry is how an opencode turn runs in a fork's container: its sessions
// live in one database, ~/.local/share/opencode/opencode.db, so only the
// fork's origin session goes in (as the export opencode's own import
// takes, never the database) and the database of the container comes
// back; its configuration is ~/.config/opencode/opencode.json (and
// OPENCODE_CONFIG_CONTENT), and it reads OPENCODE_* and the variables its
// configuration names ({env:NAME}) and the usual providers' keys.
var carry = &harness.Carry{
	State:  []string{".local/share/opencode/opencode.db", ".local/share/opencode/opencode.db-wal"},
	Config: configFiles,
	Env: func(environ []string) []string {
		return harness.PassEnv(environ, []string{"OPENCODE_"}, append(envRefs(environ), "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
			"GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY"),
			[]string{"OPENCODE_CONFIG", "OPENCODE_DB"})
	},
	Locate: func(environ []string, id string) (string, error) {
		if id == "" || strings.ContainsAny(id, "#/") {
			return "", errors.New("opencode: not a session id: " + id)
		}
		return harness.EntryPath(dbFile(harness.EnvFunc(environ)), id), nil
	},
	// A session carried in is imported into the container's database, as
	// opencode import stores an export (keeping its ids), and branched
	// from there.
	Adopt: func(ctx context.Context, environ []string, dir, file string) (string, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		var exp struct {
			Info struct {
				ID string `json:"id"`
			} `json:"info"`
		}
		if err := json.Unmarshal(b, &exp); err != nil || exp.Info.ID == "" {
			return "", errors.New("opencode: the carried session is no export")
		}
		getenv := harness.EnvFunc(environ)
		bin := getenv(binVar)
		if bin == "" {
			bin = "opencode"
		}
		if _, err := agentproc.Run(ctx, agentproc.Spec{Name: "opencode", Package: NPMPackage, Bin: bin, Args: []string{"import", file},
			Dir: dir, Base: environ}, func([]byte) error { return nil }); err != nil {
			return "", err
		}
		return harness.EntryPath(dbFile(getenv), exp.Info.ID), nil
	},
}

// configFiles are opencode's configuration files and login here.
func configFiles(environ []string) []harness.CarriedFile {
	getenv := harness.EnvFunc(environ)
	cfg := filepath.Join(getenv("HOME"), ".config")
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		cfg = d
	}
	files := harness.ConfigFiles(filepath.Join(cfg, "opencode"), ".config/opencode", "opencode.json", "opencode.jsonc", "config.json")
	if p := getenv("OPENCODE_CONFIG"); p != "" {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			files = append(files, harness.CarriedFile{Host: p, Rel: ".config/opencode/opencode.json"})
		}
	}
	return append(files, harness.ConfigFiles(dataDir(getenv), ".local/share/opencode", "auth.json")...)
}

// envRefIn finds {env:VAR} anywhere in a configuration.
var envRefIn = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// envRefs are the variables opencode's configuration names ({env:NAME}):
// its providers' keys.
func envRefs(environ []string) []string {
	var texts []string
	getenv := harness.EnvFunc(environ)
	texts = append(texts, getenv(configVar))
	for _, f := range configFiles(environ) {
		if b, err := os.ReadFile(f.Host); err == nil {
			texts = append(texts, string(b))
		}
	}
	var names []string
	for _, t := range texts {
		for _, m := range envRefIn.FindAllStringSubmatch(t, -1) {
			names = append(names, m[1])
		}
	}
	return names
}
