package pi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProviderForBuiltins: a model of pi's built-in anthropic or openai
// provider is recorded through the provider's own URL, or the one a
// models.json entry of that name routes it through, with the key from
// the provider's environment variable; a login alone is refused.
func TestProviderForBuiltins(t *testing.T) {
	t.Parallel()
	agentDirWith := func(models string) []string {
		dir := t.TempDir()
		if models != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600))
		}
		return []string{"PI_CODING_AGENT_DIR=" + dir}
	}
	env := append(agentDirWith(`{"providers": {}}`), "ANTHROPIC_API_KEY=sk-a", "OPENAI_API_KEY=sk-o")
	pr, err := ProviderFor(env, "anthropic/claude-sonnet-4-5")
	require.NoError(t, err)
	assert.Equal(t, Provider{Name: "anthropic", Model: "claude-sonnet-4-5", API: "anthropic-messages",
		BaseURL: "https://api.anthropic.com", Key: "sk-a", Builtin: true}, pr)
	pr, err = ProviderFor(env, "openai/gpt-5")
	require.NoError(t, err)
	assert.Equal(t, "openai-responses", pr.API)
	assert.Equal(t, "https://api.openai.com/v1", pr.BaseURL)
	assert.Equal(t, "sk-o", pr.Key)

	routed := append(agentDirWith(`{"providers": {"anthropic": {"baseUrl": "http://proxy.example/x"}}}`), "ANTHROPIC_API_KEY=sk-a")
	pr, err = ProviderFor(routed, "anthropic/claude-sonnet-4-5")
	require.NoError(t, err)
	assert.Equal(t, "http://proxy.example/x", pr.BaseURL, "where the person routes it")

	pr, err = ProviderFor(append(agentDirWith(""), "ANTHROPIC_API_KEY=sk-a"), "anthropic/claude-sonnet-4-5")
	require.NoError(t, err, "no models.json at all")
	assert.True(t, pr.Builtin)

	_, err = ProviderFor(agentDirWith(`{"providers": {}}`), "anthropic/claude-sonnet-4-5")
	assert.ErrorContains(t, err, "needs ANTHROPIC_API_KEY")
	_, err = ProviderFor(append(agentDirWith(`{"providers": {}}`), "GOOGLE_API_KEY=k"), "google/gemini-2.5-pro")
	assert.ErrorContains(t, err, "nor is it one of pi's built-in providers tine can record")
}

// TestGatewayDirKeepsTheUpstreamsShape: pi appends the API's path to the
// base it is given and the gateway appends what it gets to the upstream's
// base, so the gateway's base has a /v1 exactly where the upstream's has.
func TestGatewayDirKeepsTheUpstreamsShape(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]string{
		"zai/glm-4.6":                 "http://127.0.0.1:9/run/x",
		"openrouter/openai/gpt-5":     "http://127.0.0.1:9/run/x/v1",
		"anthropic/claude-sonnet-4-5": "http://127.0.0.1:9/run/x",
	} {
		dir := t.TempDir()
		env := []string{"PI_CODING_AGENT_DIR=" + dir, "HOME=" + dir,
			"ZAI_API_KEY=k", "OPENROUTER_API_KEY=k", "ANTHROPIC_API_KEY=k"}
		gw, extra, args, done, err := gatewayDir(env, model, "http://127.0.0.1:9/run/x/", "tine-gw-secret")
		require.NoError(t, err, model)
		b, err := os.ReadFile(filepath.Join(gw, "models.json"))
		require.NoError(t, err)
		var doc struct {
			Providers map[string]struct {
				BaseURL string `json:"baseUrl"`
			} `json:"providers"`
		}
		require.NoError(t, json.Unmarshal(b, &doc))
		prov, id, _ := strings.Cut(model, "/")
		assert.Equal(t, want, doc.Providers[prov].BaseURL, model)
		assert.Equal(t, []string{"--provider", prov, "--model", id}, args, "the turn keeps its built-in provider and model")
		assert.Contains(t, extra, "PI_CODING_AGENT_DIR="+gw)
		// The run's key goes by the environment; models.json names the
		// variable, and only its user reads the folder (rule 13).
		assert.Contains(t, extra, "TINE_GATEWAY_KEY=tine-gw-secret")
		// pi reads a built-in provider's own variable before models.json.
		assert.Contains(t, extra, builtins[prov].keyEnv+"=tine-gw-secret", model)
		assert.NotContains(t, string(b), "tine-gw-secret")
		for _, a := range args {
			assert.NotContains(t, a, "tine-gw-secret")
		}
		st, err := os.Stat(gw)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
		done()
	}
}

// TestGatewayDirLinksTheSessionsFolder: a recorded turn's agent dir links
// pi's own sessions folder, so the session it writes stays where pi keeps
// it; when the folder cannot be made (a file is in its place) the turn
// fails rather than writing its session into the temporary agent dir,
// which is deleted after the turn.
func TestGatewayDirLinksTheSessionsFolder(t *testing.T) {
	t.Parallel()
	agent := t.TempDir()
	env := []string{"PI_CODING_AGENT_DIR=" + agent, "HOME=" + agent, "ANTHROPIC_API_KEY=k"}
	gw, _, _, done, err := gatewayDir(env, "anthropic/claude-sonnet-4-5", "http://127.0.0.1:9/run/x", "tine-gw-secret")
	require.NoError(t, err)
	target, err := os.Readlink(filepath.Join(gw, "sessions"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(agent, "sessions"), target)
	assert.DirExists(t, target)
	done()

	blocked := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(blocked, "sessions"), nil, 0o600))
	env = []string{"PI_CODING_AGENT_DIR=" + blocked, "HOME=" + blocked, "ANTHROPIC_API_KEY=k"}
	gw, _, _, done, err = gatewayDir(env, "anthropic/claude-sonnet-4-5", "http://127.0.0.1:9/run/x", "tine-gw-secret")
	if done != nil {
		t.Cleanup(done)
	}
	require.ErrorContains(t, err, "pi: the recording's agent dir: ")
	assert.Contains(t, err.Error(), filepath.Join(blocked, "sessions"))
	assert.Empty(t, gw)
}
