package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertUsageError checks what a usage error prints: nothing on stdout
// (it may be a --json pipe), on stderr one line and where to read more,
// and exit status 2.
func assertUsageError(t *testing.T, cmd, stdout, stderr string, code int) {
	t.Helper()
	assert.Equal(t, 2, code, "exit status")
	assert.Empty(t, stdout, "nothing on stdout")
	help := "tine --help"
	if cmd != "" {
		help = "tine " + cmd + " --help"
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if assert.Len(t, lines, 2, "one line and the hint: %q", stderr) {
		assert.True(t, strings.HasPrefix(lines[0], "tine: "), lines[0])
		assert.Equal(t, "Run '"+help+"' for usage.", lines[1])
	}
}

// TestABadFlagIsOneLineOnStderr: every command, given a flag it does not
// have, says so in one line on stderr, points to its own --help, prints
// nothing on stdout, exits 2, and makes no database.
func TestABadFlagIsOneLineOnStderr(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "t.db")
			out, errOut, code := tine(t, db, c.name, "--no-such-flag")
			assertUsageError(t, c.name, out, errOut, code)
			assert.True(t, strings.HasPrefix(errOut, "tine: "+c.name+": flag provided but not defined: -no-such-flag\n"), errOut)
			_, err := os.Stat(db)
			assert.ErrorIs(t, err, os.ErrNotExist, "a usage error makes no database")
		})
	}
	out, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "--no-such-flag")
	assertUsageError(t, "", out, errOut, code)
	out, errOut, code = tine(t, filepath.Join(t.TempDir(), "t.db"), "frobnicate")
	assertUsageError(t, "", out, errOut, code)
}

// TestBadValuesAreUsageErrors: a flag's value that cannot be right
// whatever the database holds is a usage error (exit 2, one line naming
// the flag), said before anything is made, not a failed operation (1).
func TestBadValuesAreUsageErrors(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"fork", id, "--at", "banana"}, `bad --at "banana"`},
		{[]string{"fork", id, "--at", "step:0"}, `bad --at "step:0"`},
		{[]string{"fork", id, "--harness", "nope"}, `--harness is claude, codex, pi, qwen, opencode, gemini, acp, openai, anthropic or script, not "nope"`},
		{[]string{"fork", id, "--parallel", "0"}, "--parallel is how many turns run at once"},
		{[]string{"fork", id, "--check-timeout", "5"}, "-check-timeout"},
		{[]string{"fork", id, "-n", "x"}, "-n"},
		{[]string{"fork", id, "-n", "0"}, "-n is how many forks"},
		{[]string{"fork", id, "--max-tokens", "x"}, "--max-tokens"},
		{[]string{"run", id, "-m", "hi", "--harness", "nope"}, `--harness is claude, codex, pi, qwen, opencode, gemini, acp, openai, anthropic or script, not "nope"`},
		{[]string{"replay", id, "--at-step", "1", "--continuations", "99"}, "--continuations must be 0..10"},
		{[]string{"replay", id, "--at-step", "1", "--on-divergence", "huh"}, `--on-divergence is stop or live, not "huh"`},
		{[]string{"replay", id, "--at-step", "1", "--continuations", "0", "--on-divergence", "live"}, "--continuations 0 only verifies"},
		{[]string{"gc", "--tapes-older-than", "soon"}, "--tapes-older-than"},
		{[]string{"import", "--format", "yaml"}, `--format is auto, claude`},
		{[]string{"fork", id, "--score", "best"}, `--score is exit or number, not "best"`},
		{[]string{"fork", id, "--permissions", "maybe"}, `permissions must be auto or ask, not "maybe"`},
		{[]string{"export", id, "--format", "pdf"}, `--format is json or md, not "pdf"`},
		{[]string{"show"}, "show: missing argument"},
		{[]string{"search"}, "search: missing argument"},
		{[]string{"search", "paris", "--limit", "0"}, "search: --limit is how many messages to show, 1 or more, not 0"},
		{[]string{"search", " "}, "search: QUERY is the words to find"},
		{[]string{"show", id, "extra"}, `show: unexpected argument "extra"`},
	} {
		out, errOut, code := tine(t, db, tc.args...)
		assertUsageError(t, tc.args[0], out, errOut, code)
		assert.Contains(t, errOut, tc.says, "%v", tc.args)
	}
	out, _, code := tine(t, db, "ls", "--json")
	require.Equal(t, 0, code)
	assert.Equal(t, 1, strings.Count(out, `"fork_at"`), "one run: no usage error made a fork")
}

// TestDoubleDashEndsTheFlags: after `--` every argument is one, however
// it is spelled, not only the first.
func TestDoubleDashEndsTheFlags(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	_, errOut, code := tine(t, db, "fork", id, "-n", "2", "--name=--a", "--name=-b", "--harness", "script")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := tine(t, db, "show", "--", "--a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "--a")
	out, errOut, code = tine(t, db, "compare", "--json", "--", "--a", "-b")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"name": "-b"`)
	// A `--` that is a flag's value ends nothing: this fork is named "--".
	out, errOut, code = tine(t, db, "fork", id, "--name", "--", "--json", "--harness", "script")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"name": "--"`)
}
