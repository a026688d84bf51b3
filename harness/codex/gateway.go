package codex

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Pointing Codex at tine's gateway (TurnRequest.ModelURL, rule 9 in
// ARCHITECTURE.md) keeps the provider the session uses, so the session
// can be resumed later without the gateway (Codex refuses to resume a
// session whose provider is not configured): the built-in "openai"
// provider gets `-c openai_base_url=...` and the gateway run's key as
// OPENAI_API_KEY; a provider from config.toml gets its base_url and
// env_key overridden with -c, env_key naming the variable that holds the
// run's key. The -c options are on Codex's command line, which every user
// of the machine can read: they hold the gateway's URL, which is no
// secret, and the name of a variable, never a key (rule 13 in
// ARCHITECTURE.md). The person's config.toml is never written.

// Provider is the model provider Codex uses, from config.toml.
type Provider struct {
	Name    string // "openai" when config.toml names none
	BaseURL string // "" for the built-in provider's default
	KeyEnv  string // the environment variable holding its key
}

// ProviderFrom reads the provider of $CODEX_HOME/config.toml (env's).
func ProviderFrom(env []string) Provider {
	p := Provider{Name: "openai", KeyEnv: "OPENAI_API_KEY"}
	b, err := os.ReadFile(filepath.Join(codexHome(env), "config.toml"))
	if err != nil {
		return p
	}
	top, sections := readTOML(b)
	if v := top["model_provider"]; v != "" {
		p.Name = v
	}
	if p.Name == "openai" {
		p.BaseURL = top["openai_base_url"]
		return p
	}
	s := sections["model_providers."+p.Name]
	p.BaseURL = s["base_url"]
	p.KeyEnv = s["env_key"]
	return p
}

// readTOML reads the string keys of a config.toml: the top-level ones and
// those of each [section]. Enough for the provider; anything else is
// skipped.
func readTOML(b []byte) (top map[string]string, sections map[string]map[string]string) {
	top, sections = map[string]string{}, map[string]map[string]string{}
	cur := top
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			name := strings.Trim(line, "[] ")
			cur = map[string]string{}
			sections[name] = cur
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if s, err := strconv.Unquote(v); err == nil {
				cur[strings.Trim(k, `"`)] = s
			} else if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
				cur[strings.Trim(k, `"`)] = v[1 : len(v)-1]
			}
		}
	}
	return top, sections
}

// gatewayArgs are the -c options and environment that send a turn's
// model calls to url, with the gateway run's key (in the environment).
func gatewayArgs(env []string, url, key string) (args, extraEnv []string) {
	base := strconv.Quote(strings.TrimRight(url, "/") + "/v1")
	p := ProviderFrom(env)
	if p.Name == "openai" {
		return []string{"-c", "openai_base_url=" + base}, []string{"OPENAI_API_KEY=" + key}
	}
	pre := "model_providers." + p.Name + "."
	return []string{"-c", pre + "base_url=" + base, "-c", pre + "env_key=" + strconv.Quote(gatewayKeyEnv)},
		[]string{gatewayKeyEnv + "=" + key}
}

// gatewayKeyEnv holds the gateway run's key of a provider pointed at the
// gateway.
const gatewayKeyEnv = "TINE_GATEWAY_KEY"
