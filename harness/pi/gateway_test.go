package pi

import (
	"os"
	"path/filepath"
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
	assert.ErrorContains(t, err, "built-in anthropic or openai")
}
