package harness

import (
	"cmp"
	"errors"
	"path/filepath"
	"strings"
)

// Wire is a model API's wire format: what an agent's model calls speak,
// and so how tine's gateway reads, records and answers them.
type Wire string

const (
	// WireAnthropic is the Anthropic Messages API (POST .../messages).
	WireAnthropic Wire = "anthropic"
	// WireChat is OpenAI Chat Completions (POST .../chat/completions).
	WireChat Wire = "chat"
	// WireResponses is the OpenAI Responses API (POST .../responses).
	WireResponses Wire = "responses"
	// WireGemini is the Gemini API (POST .../models/M:generateContent and
	// :streamGenerateContent).
	WireGemini Wire = "gemini"
)

// Upstream is where a wire format's model calls really go.
type Upstream struct {
	// BaseURL is the API's base, e.g. "https://api.anthropic.com" or
	// "https://api.openai.com/v1": the request's path below the run's
	// base URL is appended to it (a "/v1" in both is not doubled).
	BaseURL string
	// APIKey is the real key: sent as x-api-key (Anthropic),
	// x-goog-api-key (Gemini) or "Authorization: Bearer" (OpenAI) to
	// BaseURL's host only. "" sends no key.
	APIKey string
}

// AnthropicGatewayEnv points Claude Code (run as itself, or behind an ACP
// agent) at tine's gateway at url: its base URL, the gateway run's key
// (TurnRequest.ModelKey) for the real one, by the environment (rule 13 in
// ARCHITECTURE.md), no login token, and none of the calls that are not
// the conversation's (so a tape holds one model call a step). Nothing when
// url is empty.
func AnthropicGatewayEnv(url, key string) []string {
	if url == "" {
		return nil
	}
	return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=" + key,
		"ANTHROPIC_AUTH_TOKEN=", "CLAUDE_CODE_OAUTH_TOKEN=", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
}

// ClaudeState is where Claude Code (run as itself, or behind an ACP
// agent) writes its own state in environ: $CLAUDE_CONFIG_DIR, else
// ~/.claude and ~/.claude.json. A replay's sandbox lets it write there
// (TurnRequest.Sandbox).
func ClaudeState(environ []string) []string {
	if d := Getenv(environ, "CLAUDE_CONFIG_DIR"); d != "" {
		return []string{d}
	}
	home := Getenv(environ, "HOME")
	if home == "" {
		return nil
	}
	return []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json")}
}

// AnthropicUpstream is where Claude Code's model calls go (run as
// itself, or behind an ACP agent): ANTHROPIC_BASE_URL, else Anthropic's
// API, with ANTHROPIC_API_KEY. A Claude login's token cannot go through
// the gateway, so a key is required.
func AnthropicUpstream(environ []string) (Wire, Upstream, error) {
	key := Getenv(environ, "ANTHROPIC_API_KEY")
	if key == "" {
		return "", Upstream{}, errors.New("recording and replaying Claude Code need ANTHROPIC_API_KEY: a Claude login's token cannot go through tine's gateway")
	}
	return WireAnthropic, Upstream{BaseURL: cmp.Or(Getenv(environ, "ANTHROPIC_BASE_URL"), "https://api.anthropic.com"), APIKey: key}, nil
}

// Getenv is the value of key in environ (KEY=VALUE pairs; the last one
// wins, as for a process), "" when it is not there.
func Getenv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
