package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGatewayKeepsTheProvider: a turn pointed at tine's gateway keeps the
// session's provider (so it can be resumed without the gateway): the
// built-in one through openai_base_url, a config.toml one through its own
// base_url and env_key; the key the agent gets is the gateway run's, in
// its environment only, never among its arguments (rule 13).
func TestGatewayKeepsTheProvider(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := []string{"CODEX_HOME=" + home}
	args, extra := gatewayArgs(env, "http://127.0.0.1:9", "tine-gw-secret")
	assert.Equal(t, []string{"-c", `openai_base_url="http://127.0.0.1:9/v1"`}, args)
	assert.Equal(t, []string{"OPENAI_API_KEY=tine-gw-secret"}, extra)
	assert.Equal(t, Provider{Name: "openai", KeyEnv: "OPENAI_API_KEY"}, ProviderFrom(env))

	require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte(`model = "gpt-5.5"
model_provider = "local"   
# a comment
[analytics]
enabled = false

[model_providers.local]
name = "a local server"
base_url = "http://10.0.0.2:8000/v1"
env_key = 'LOCAL_KEY'
`), 0o600))
	assert.Equal(t, Provider{Name: "local", BaseURL: "http://10.0.0.2:8000/v1", KeyEnv: "LOCAL_KEY"}, ProviderFrom(env))
	args, extra = gatewayArgs(env, "http://127.0.0.1:9/", "tine-gw-secret")
	assert.Equal(t, []string{"-c", `model_providers.local.base_url="http://127.0.0.1:9/v1"`,
		"-c", `model_providers.local.env_key="TINE_GATEWAY_KEY"`}, args)
	assert.Equal(t, []string{"TINE_GATEWAY_KEY=tine-gw-secret"}, extra)
}
