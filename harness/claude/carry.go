package claude

import (
	"encoding/json"
	"fmt"
	"os"
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
	Opening: opening,
}

// opening readies Claude Code in a fork's container for a person: its
// first start (a new HOME) would check that api.anthropic.com answers,
// ask whether to use the key in its environment and whether to trust
// the fork's folder, which its user answered on their own machine. They
// are answered in ~/.claude.json (kept as it is otherwise).
func opening(environ []string, dir string) error {
	getenv := harness.EnvFunc(environ)
	file := filepath.Join(configDir(getenv), ".claude.json")
	if getenv("CLAUDE_CONFIG_DIR") == "" {
		file = filepath.Join(getenv("HOME"), ".claude.json")
	}
	state := map[string]any{}
	if b, err := os.ReadFile(file); err == nil {
		_ = json.Unmarshal(b, &state)
	}
	state["hasCompletedOnboarding"] = true
	projects, _ := state["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	project, _ := projects[dir].(map[string]any)
	if project == nil {
		project = map[string]any{}
	}
	project["hasTrustDialogAccepted"] = true
	projects[dir] = project
	state["projects"] = projects
	if key := getenv("ANTHROPIC_API_KEY"); key != "" {
		// Claude Code remembers a key by its last 20 characters.
		state["customApiKeyResponses"] = map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}}
	}
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o600)
}

// configDir is Claude Code's folder for getenv: $CLAUDE_CONFIG_DIR, else
// ~/.claude.
func configDir(getenv func(string) string) string {
	if roots := dirsFrom(getenv); len(roots) > 0 {
		return filepath.Dir(roots[0])
	}
	return ""
}
