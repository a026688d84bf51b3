package codex

import (
	"path/filepath"

	"tine/harness"
)

// carry is how a Codex turn runs in a fork's container: its rollouts live
// in ~/.codex/sessions (by day; a thread is found by its id), its
// configuration and login in ~/.codex (config.toml, auth.json), and it
// reads OPENAI_*, CODEX_* and the variable its provider's env_key names.
var carry = &harness.Carry{
	State: []string{".codex/sessions"},
	Config: func(environ []string) []harness.CarriedFile {
		return harness.ConfigFiles(codexHome(environ), ".codex", "config.toml", "auth.json")
	},
	Env: func(environ []string) []string {
		return harness.PassEnv(environ, []string{"OPENAI_", "CODEX_"}, harness.EnvNamed(ProviderFrom(environ).KeyEnv),
			[]string{"CODEX_HOME"})
	},
	Locate: func(environ []string, id string) (string, error) {
		return findRollout(id, []string{filepath.Join(codexHome(environ), "sessions")})
	},
}
