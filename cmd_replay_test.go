package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBackgroundReplayKeepsTheKeyOffItsCommandLine: `tine replay
// --api-key K` without --wait goes on in a tine of its own, which gets the
// key by its environment, never on its command line, where every user of
// the machine reads it (rule 13 in ARCHITECTURE.md).
func TestBackgroundReplayKeepsTheKeyOffItsCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"run1", "--at-step", "2", "--api-key", "sk-secret-1"},
		{"--api-key=sk-secret-1", "run1", "--at-step", "2"},
		{"run1", "-api-key", "sk-secret-1", "--at-step", "2"},
	} {
		cmd := backgroundReplay("/bin/tine", "t.db", []string{"a", "b"}, args)
		argv := strings.Join(cmd.Args, " ")
		assert.NotContains(t, argv, "sk-secret-1", "%v", args)
		assert.NotContains(t, argv, "api-key", "%v", args)
		assert.Contains(t, argv, "run1")
		assert.Contains(t, argv, "--at-step 2")
		assert.Contains(t, argv, "--trials a,b")
		assert.Contains(t, cmd.Env, "OPENAI_API_KEY=sk-secret-1")
		assert.Contains(t, cmd.Env, "ANTHROPIC_API_KEY=sk-secret-1")
	}
}
