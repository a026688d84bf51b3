package sandbox

import (
	"os"
	"slices"
	"testing"
)

// TestMain lets the test binary be the relay inside a jail, as tine is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == RelayArg {
		os.Exit(RelayMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestScrub: every variable that looks like a credential goes, but the
// gateway run's key and the empty ones that hide a credential; a setting
// whose name merely holds such a word stays.
func TestScrub(t *testing.T) {
	env := []string{"HOME=/home/a", "PATH=/bin", "OPENAI_API_KEY=sk-real", "ANTHROPIC_API_KEY=tine-gw-1", "TINE_GATEWAY_KEY=tine-gw-1",
		"GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=a", "SSH_AUTH_SOCK=/tmp/ssh/agent", "NPM_CONFIG__AUTH=x", "DB_PASSWORD=p",
		"PGPASSWORD=p", "OPENROUTER_APIKEY=k", "GH_OAUTH=x", "Authorization=Bearer x",
		"ANTHROPIC_AUTH_TOKEN=", "GOOGLE_APPLICATION_CREDENTIALS=/k.json", "NO_PROXY=127.0.0.1",
		"CLAUDE_CODE_MAX_OUTPUT_TOKENS=1234", "KEYTIMEOUT=1", "TOKENIZERS_PARALLELISM=false"}
	got := Scrub(env, []string{"tine-gw-1"})
	want := []string{"HOME=/home/a", "PATH=/bin", "ANTHROPIC_API_KEY=tine-gw-1", "TINE_GATEWAY_KEY=tine-gw-1", "ANTHROPIC_AUTH_TOKEN=", "NO_PROXY=127.0.0.1",
		"CLAUDE_CODE_MAX_OUTPUT_TOKENS=1234", "KEYTIMEOUT=1", "TOKENIZERS_PARALLELISM=false"}
	if !slices.Equal(got, want) {
		t.Errorf("Scrub = %q\nwant %q", got, want)
	}
	if (*Spec)(nil).With("/x") != nil {
		t.Error("no jail with more paths is still no jail")
	}
}
