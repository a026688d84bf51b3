package qwen

import (
	"tine/harness"
)

// carry is how a Qwen Code turn runs in a fork's container: its sessions
// live in ~/.qwen/projects (one folder per cwd), its settings and login
// in ~/.qwen, and it reads OPENAI_* (its usual provider), QWEN_* and the
// other providers' keys from the environment.
var carry = &harness.Carry{
	State: []string{".qwen/projects"},
	Config: func(environ []string) []harness.CarriedFile {
		return harness.ConfigFiles(qwenHome(harness.EnvFunc(environ)), ".qwen", "settings.json", "oauth_creds.json", ".env")
	},
	Env: func(environ []string) []string {
		return harness.PassEnv(environ, []string{"OPENAI_", "QWEN_", "DASHSCOPE_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"}, nil,
			[]string{"QWEN_HOME", "QWEN_RUNTIME_DIR"})
	},
	Locate: func(environ []string, id string) (string, error) {
		return findSession(id, dirsFrom(harness.EnvFunc(environ)))
	},
}
