package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeStartsWithAQuickStart: the README's first section says how to
// build tine and start it, on the first screenful, and every tine command
// line it shows there is one tine has.
func TestReadmeStartsWithAQuickStart(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	readme := string(b)
	first := regexp.MustCompile(`(?m)^## .*$`).FindStringIndex(readme)
	require.NotNil(t, first)
	assert.Equal(t, "## Quick start", readme[first[0]:first[1]], "the first section")
	assert.Less(t, strings.Count(readme[:first[0]], "\n"), 20, "on the first screenful")

	quick := readme[first[1]:]
	quick = quick[:strings.Index(quick, "\n## ")]
	assert.Contains(t, quick, "go build -o ~/.local/bin/tine .")
	assert.Contains(t, quick, "go test ./...")
	names := map[string]bool{}
	for _, c := range commands() {
		names[c.name] = true
	}
	// tine, then perhaps a command: at a line's start or inside <(...).
	invocation := regexp.MustCompile(`(?m)(?:^|<\()tine(?: +([a-z-]+))?`)
	blocks := strings.Split(quick, "```")
	var seen []string
	for i := 1; i < len(blocks); i += 2 {
		for _, m := range invocation.FindAllStringSubmatch(blocks[i], -1) {
			seen = append(seen, m[1])
			if m[1] != "" {
				assert.True(t, names[m[1]], "tine %s is no command of tine's", m[1])
			}
		}
	}
	assert.Subset(t, seen, []string{"", "demo", "import", "ls", "completion"})
}
