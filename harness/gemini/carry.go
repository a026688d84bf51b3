package gemini

import (
	"tine/harness"
)

// carry is how a Gemini CLI turn runs in a fork's container: its sessions
// live in ~/.gemini/tmp (one folder per project), its settings and login
// in ~/.gemini, and it reads GEMINI_* and GOOGLE_* from the environment.
var carry = &harness.Carry{
	State: []string{".gemini/tmp"},
	Config: func(environ []string) []harness.CarriedFile {
		return harness.ConfigFiles(geminiDir(harness.EnvFunc(environ)), ".gemini", "settings.json", "oauth_creds.json",
			"google_accounts.json", "installation_id")
	},
	Env: func(environ []string) []string {
		return harness.PassEnv(environ, []string{"GEMINI_", "GOOGLE_"}, nil, []string{"GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"})
	},
	Locate: func(environ []string, id string) (string, error) {
		return findSession(id, dirsFrom(harness.EnvFunc(environ)))
	},
}
