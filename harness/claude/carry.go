package claude

import (
	"fmt"
	"path/filepath"
	"strings"

	"tine/harness"
)

// carry is how a Claude Code turn runs in a fork's container: its
// sessions live in ~/.claude/projects (one folder per cwd; `claude
// --resume ID` finds one under any), its settings and login (an OAuth
// login's .credentials.json) in ~/.claude, and it reads ANTHROPIC_* and
// its own switches from the environment.
var carry = &harness.Carry{
	State: []string{".claude/projects"},
	Config: func(environ []string) []harness.CarriedFile {
		return harness.ConfigFiles(configDir(harness.EnvFunc(environ)), ".claude", "settings.json", ".credentials.json")
	},
	Env: func(environ []string) []string {
		return harness.PassEnv(environ, []string{"ANTHROPIC_", "CLAUDE_CODE_", "DISABLE_"},
			[]string{"MAX_THINKING_TOKENS", "BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS", "API_TIMEOUT_MS",
				"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"},
			[]string{"CLAUDE_CONFIG_DIR"})
	},
	Locate: func(environ []string, id string) (string, error) {
		if id == "" || strings.ContainsAny(id, `/\*?[]`) {
			return "", fmt.Errorf("claude: %q is not a session id", id)
		}
		roots := dirsFrom(harness.EnvFunc(environ))
		for _, root := range roots {
			if found, _ := filepath.Glob(filepath.Join(root, "*", id+".jsonl")); len(found) > 0 {
				return found[0], nil
			}
		}
		return "", fmt.Errorf("claude: no transcript %s.jsonl under %s", id, strings.Join(roots, ", "))
	},
}

// configDir is Claude Code's folder for getenv: $CLAUDE_CONFIG_DIR, else
// ~/.claude.
func configDir(getenv func(string) string) string {
	if roots := dirsFrom(getenv); len(roots) > 0 {
		return filepath.Dir(roots[0])
	}
	return ""
}
