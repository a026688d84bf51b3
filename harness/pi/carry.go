package pi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"

	"tine/harness"
)

// carry is how a pi turn runs in a fork's container: its sessions live in
// ~/.pi/agent/sessions (one folder per cwd), its providers, settings and
// logins in ~/.pi/agent (models.json, settings.json, auth.json), and it
// reads PI_* and its providers' keys from the environment: the variables
// models.json's apiKey names, and those of pi's built-in providers.
var carry = &harness.Carry{
	State: []string{".pi/agent/sessions"},
	Config: func(environ []string) []harness.CarriedFile {
		return harness.ConfigFiles(agentDir(harness.EnvFunc(environ)), ".pi/agent", "models.json", "settings.json", "auth.json")
	},
	Env: func(environ []string) []string {
		names := keyNames(agentDir(harness.EnvFunc(environ)))
		for _, b := range builtins {
			if b.keyEnv != "" {
				names = append(names, b.keyEnv)
			}
		}
		return harness.PassEnv(environ, []string{"PI_"}, names, []string{"PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR"})
	},
	Locate: func(environ []string, id string) (string, error) {
		return findSession(harness.EnvFunc(environ), id, "")
	},
}

// keyNames are the variables the providers of agent/models.json name as
// their apiKey.
func keyNames(agent string) []string {
	b, err := os.ReadFile(filepath.Join(agent, "models.json"))
	if err != nil {
		return nil
	}
	var doc struct {
		Providers map[string]struct {
			APIKey string `json:"apiKey"`
		} `json:"providers"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	var refs []string
	for _, p := range doc.Providers {
		refs = append(refs, p.APIKey)
	}
	sort.Strings(refs)
	return harness.EnvNamed(refs...)
}
