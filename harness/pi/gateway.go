package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pointing pi at tine's gateway (TurnRequest.ModelURL, rule 9 in
// ARCHITECTURE.md). pi takes its providers from models.json in its agent
// dir, so a recorded turn runs with an agent dir of its own
// (PI_CODING_AGENT_DIR): the person's models.json with one more provider,
// "tine-gateway", a copy of the provider the turn uses whose baseUrl is the
// gateway and whose apiKey names TINE_GATEWAY_KEY, the variable holding the
// gateway run's key (the folder and its files are the person's own to
// read: rule 13 in ARCHITECTURE.md); the person's settings.json and
// auth.json alongside; sessions where they always are
// (PI_CODING_AGENT_SESSION_DIR). pi's built-in providers (those in
// builtins) are recorded through pi's own way to route one through a
// proxy: an entry of that name in models.json whose baseUrl is the
// gateway; the turn keeps its provider and model.

// gatewayProvider names the provider a recorded turn uses.
const gatewayProvider = "tine-gateway"

// Provider is the model provider a pi turn uses, as models.json defines it.
type Provider struct {
	Name    string
	Model   string // the model's id within the provider
	API     string // openai-completions, openai-responses or anthropic-messages
	BaseURL string
	// Key is the API key: models.json's apiKey names an environment
	// variable, or is the key itself.
	Key string
	// raw is the provider's definition, for the gateway's copy.
	raw map[string]any
	// Builtin: one of pi's own providers (builtins), not defined in
	// models.json (which may still route it through a baseUrl of its own).
	Builtin bool
}

// builtin is one of pi's built-in providers, as pi 0.73.1 defines it.
type builtin struct {
	api, baseURL, keyEnv string
}

// builtins are pi's providers tine can record: those that speak one wire
// tine's gateway speaks, at one fixed URL (pi-ai's models.generated.js and
// env-api-keys.js of pi 0.73.1). Left out: Google's, Mistral's and
// Bedrock's own APIs, Codex's ChatGPT backend, and providers whose URL
// holds the person's account (Cloudflare) or that mix several APIs.
var builtins = map[string]builtin{
	"anthropic":             {"anthropic-messages", "https://api.anthropic.com", "ANTHROPIC_API_KEY"},
	"openai":                {"openai-responses", "https://api.openai.com/v1", "OPENAI_API_KEY"},
	"cerebras":              {"openai-completions", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"},
	"deepseek":              {"openai-completions", "https://api.deepseek.com", "DEEPSEEK_API_KEY"},
	"fireworks":             {"anthropic-messages", "https://api.fireworks.ai/inference", "FIREWORKS_API_KEY"},
	"groq":                  {"openai-completions", "https://api.groq.com/openai/v1", "GROQ_API_KEY"},
	"huggingface":           {"openai-completions", "https://router.huggingface.co/v1", "HF_TOKEN"},
	"kimi-coding":           {"anthropic-messages", "https://api.kimi.com/coding", "KIMI_API_KEY"},
	"minimax":               {"anthropic-messages", "https://api.minimax.io/anthropic", "MINIMAX_API_KEY"},
	"minimax-cn":            {"anthropic-messages", "https://api.minimaxi.com/anthropic", "MINIMAX_CN_API_KEY"},
	"moonshotai":            {"openai-completions", "https://api.moonshot.ai/v1", "MOONSHOT_API_KEY"},
	"moonshotai-cn":         {"openai-completions", "https://api.moonshot.cn/v1", "MOONSHOT_API_KEY"},
	"opencode-go":           {"openai-completions", "https://opencode.ai/zen/go/v1", "OPENCODE_API_KEY"},
	"openrouter":            {"openai-completions", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"},
	"vercel-ai-gateway":     {"anthropic-messages", "https://ai-gateway.vercel.sh", "AI_GATEWAY_API_KEY"},
	"xai":                   {"openai-completions", "https://api.x.ai/v1", "XAI_API_KEY"},
	"xiaomi":                {"anthropic-messages", "https://api.xiaomimimo.com/anthropic", "XIAOMI_API_KEY"},
	"zai":                   {"openai-completions", "https://api.z.ai/api/coding/paas/v4", "ZAI_API_KEY"},
	"xiaomi-token-plan-cn":  {"anthropic-messages", "https://token-plan-cn.xiaomimimo.com/anthropic", "XIAOMI_TOKEN_PLAN_CN_API_KEY"},
	"xiaomi-token-plan-ams": {"anthropic-messages", "https://token-plan-ams.xiaomimimo.com/anthropic", "XIAOMI_TOKEN_PLAN_AMS_API_KEY"},
	"xiaomi-token-plan-sgp": {"anthropic-messages", "https://token-plan-sgp.xiaomimimo.com/anthropic", "XIAOMI_TOKEN_PLAN_SGP_API_KEY"},
}

// defaultModel is the defaultProvider and defaultModel of pi's
// settings.json at path ("" when it has none).
func defaultModel(path string) (provider, model string) {
	var settings struct {
		DefaultProvider string `json:"defaultProvider"`
		DefaultModel    string `json:"defaultModel"`
	}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &settings)
	}
	return settings.DefaultProvider, settings.DefaultModel
}

// providerURL is where pi sends provider's calls: the baseUrl models.json
// gives it, else that of pi's built-in provider of that name ("" when
// neither says).
func providerURL(getenv func(string) string, provider string) string {
	var doc struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
		} `json:"providers"`
	}
	if b, err := os.ReadFile(filepath.Join(agentDir(getenv), "models.json")); err == nil {
		_ = json.Unmarshal(b, &doc)
	}
	if u := doc.Providers[provider].BaseURL; u != "" {
		return u
	}
	return builtins[provider].baseURL
}

// ProviderFor finds the provider of model (its id; "" means the default
// model of settings.json) in the models.json of the agent dir env names.
func ProviderFor(env []string, model string) (Provider, error) {
	getenv := envLookup(env)
	agent := agentDir(getenv)
	var settings struct{ DefaultProvider, DefaultModel string }
	settings.DefaultProvider, settings.DefaultModel = defaultModel(filepath.Join(agent, "settings.json"))
	if model == "" {
		model = settings.DefaultModel
	}
	var doc struct {
		Providers map[string]map[string]any `json:"providers"`
	}
	// No models.json: pi's built-in providers only.
	b, err := os.ReadFile(filepath.Join(agent, "models.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Provider{}, fmt.Errorf("pi: recording needs the turn's provider: %w", err)
	}
	if err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			return Provider{}, fmt.Errorf("pi: %s: %w", filepath.Join(agent, "models.json"), err)
		}
	}
	// A model may be named "provider/id", as pi's sessions record it.
	if prov, id, ok := strings.Cut(model, "/"); ok {
		_, known := doc.Providers[prov]
		if _, builtin := builtins[prov]; known || builtin {
			settings.DefaultProvider, model = prov, id
		}
	}
	has := func(p map[string]any) bool {
		models, _ := p["models"].([]any)
		for _, m := range models {
			if mm, ok := m.(map[string]any); ok && (model == "" || mm["id"] == model) {
				return true
			}
		}
		return false
	}
	name := ""
	if p, ok := doc.Providers[settings.DefaultProvider]; ok && has(p) {
		name = settings.DefaultProvider
	} else {
		for n, p := range doc.Providers {
			if n != gatewayProvider && has(p) && (name == "" || n < name) {
				name = n
			}
		}
	}
	if b, ok := builtins[settings.DefaultProvider]; name == "" && ok {
		return builtinProvider(settings.DefaultProvider, model, b, doc.Providers[settings.DefaultProvider], getenv)
	}
	if name == "" {
		return Provider{}, fmt.Errorf("pi: no provider in %s has model %q, nor is it one of pi's built-in providers tine can record (those speaking Anthropic Messages, Chat Completions or Responses at a fixed URL)", filepath.Join(agent, "models.json"), model)
	}
	p := doc.Providers[name]
	pr := Provider{Name: name, Model: model, raw: p}
	pr.API, _ = p["api"].(string)
	pr.BaseURL, _ = p["baseUrl"].(string)
	pr.Key = apiKey(p, getenv)
	if pr.BaseURL == "" {
		return Provider{}, fmt.Errorf("pi: provider %q in models.json has no baseUrl", name)
	}
	return pr, nil
}

// apiKey is a models.json provider's key: its apiKey names an environment
// variable, or is the key itself.
func apiKey(p map[string]any, getenv func(string) string) string {
	key, _ := p["apiKey"].(string)
	if v := getenv(key); key != "" && v != "" {
		return v
	}
	return key
}

// builtinProvider is pi's built-in provider name for model: where its
// calls go (the baseUrl of models.json's entry of that name, which routes
// it through a proxy, else pi's own) and with which key.
func builtinProvider(name, model string, b builtin, override map[string]any, getenv func(string) string) (Provider, error) {
	if model == "" {
		return Provider{}, fmt.Errorf("pi: recording with pi's built-in %s provider needs the model (--model, or defaultModel in settings.json)", name)
	}
	pr := Provider{Name: name, Model: model, API: b.api, BaseURL: b.baseURL, Builtin: true, raw: override}
	if u, _ := override["baseUrl"].(string); u != "" {
		pr.BaseURL = u
	}
	key := apiKey(override, getenv)
	if key == "" {
		key = getenv(b.keyEnv)
	}
	if key == "" {
		return Provider{}, fmt.Errorf("pi: recording with pi's built-in %s provider needs %s: a login's token cannot go through tine's gateway", name, b.keyEnv)
	}
	pr.Key = key
	return pr, nil
}

// gatewayDir writes the agent dir a recorded turn runs with and returns
// it with the environment and arguments that use it; done removes it.
func gatewayDir(env []string, model, url, key string) (dir string, extraEnv, args []string, done func(), err error) {
	getenv := envLookup(env)
	pr, err := ProviderFor(env, model)
	if err != nil {
		return "", nil, nil, nil, err
	}
	agent := agentDir(getenv)
	if agent == "" {
		return "", nil, nil, nil, errors.New("pi: no agent folder (no HOME)")
	}
	dir, err = os.MkdirTemp("", "tine-pi-agent-")
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("pi: %w", err)
	}
	done = func() { os.RemoveAll(dir) }
	var doc map[string]any
	if b, err := os.ReadFile(filepath.Join(agent, "models.json")); err == nil {
		_ = json.Unmarshal(b, &doc)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	providers, _ := doc["providers"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	gw := map[string]any{}
	for k, v := range pr.raw {
		gw[k] = v
	}
	// The gateway's URL has the upstream's shape: pi appends the API's
	// path (/chat/completions, /responses) to the base as it is, and the
	// gateway appends what it receives to the upstream's base, so a /v1
	// goes in only where the upstream's base ends with one (an Anthropic
	// client adds /v1/messages itself).
	base := strings.TrimRight(url, "/")
	if pr.API != "anthropic-messages" && strings.HasSuffix(strings.TrimRight(pr.BaseURL, "/"), "/v1") {
		base += "/v1"
	}
	gw["baseUrl"] = base
	gw["apiKey"] = "TINE_GATEWAY_KEY"
	provider := gatewayProvider
	if pr.Builtin {
		// pi's way to route a built-in provider through a proxy: its own
		// name, a baseUrl, the built-in models kept.
		provider = pr.Name
	}
	providers[provider] = gw
	doc["providers"] = providers
	b, err := json.MarshalIndent(doc, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "models.json"), b, 0o600)
	}
	for _, f := range []string{"settings.json", "auth.json"} {
		if err == nil {
			if src, rerr := os.ReadFile(filepath.Join(agent, f)); rerr == nil {
				err = os.WriteFile(filepath.Join(dir, f), src, 0o600)
			}
		}
	}
	if err != nil {
		done()
		return "", nil, nil, nil, fmt.Errorf("pi: the recording's agent dir: %w", err)
	}
	id := pr.Model
	if id == "" {
		if models, _ := pr.raw["models"].([]any); len(models) > 0 {
			if m, ok := models[0].(map[string]any); ok {
				id, _ = m["id"].(string)
			}
		}
	}
	// Sessions stay where pi keeps them: a folder set by the environment
	// or settings.json still applies; the default one is linked in.
	if getenv("PI_CODING_AGENT_SESSION_DIR") == "" && settingsSessionDir(filepath.Join(agent, "settings.json")) == "" {
		real := filepath.Join(agent, "sessions")
		err = os.MkdirAll(real, 0o700)
		if err == nil {
			err = os.Symlink(real, filepath.Join(dir, "sessions"))
		}
		if err != nil {
			done()
			return "", nil, nil, nil, fmt.Errorf("pi: the recording's agent dir: %w", err)
		}
	}
	// The run's key by the environment (models.json names the variable),
	// never on pi's command line (rule 13 in ARCHITECTURE.md). A login
	// token would take precedence over it.
	extraEnv = []string{"PI_CODING_AGENT_DIR=" + dir, "TINE_GATEWAY_KEY=" + key, "ANTHROPIC_OAUTH_TOKEN="}
	if pr.Builtin {
		// A built-in provider's own variable comes before models.json's
		// apiKey: it holds the run's key too (and so not the real one).
		extraEnv = append(extraEnv, builtins[pr.Name].keyEnv+"="+key)
	}
	return dir, extraEnv, []string{"--provider", provider, "--model", id}, done, nil
}
