package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// completeSeed is a database holding the seed example and four forks of
// it, named to be completed: two alike, one with a colon (a word break to
// bash), one that reads as a flag.
func completeSeed(t *testing.T) (db, id string) {
	t.Helper()
	db, id = importSeed(t)
	_, errOut, code := tine(t, db, "fork", id, "-n", "4", "--name", "rome-only", "--name", "rome-too",
		"--name", "x:one", "--name=-dash", "--harness", "script")
	require.Equal(t, 0, code, errOut)
	return db, id
}

// completeValues runs `tine __complete words...` on db: "files", or the
// candidates' values.
func completeValues(t *testing.T, db string, words ...string) []string {
	t.Helper()
	out, errOut, code := tine(t, db, append([]string{completeCmd}, words...)...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] == "files" {
		return []string{"files"}
	}
	require.Equal(t, "words", lines[0], out)
	var vs []string
	for _, l := range lines[1:] {
		v, _, _ := strings.Cut(l, "\t")
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

func sorted(vs ...string) []string { slices.Sort(vs); return vs }

// TestCompleteCandidates: what `tine __complete` offers at each place of
// a command line, run ids and fork names from the database included.
func TestCompleteCandidates(t *testing.T) {
	t.Parallel()
	db, id := completeSeed(t)
	short := model.ShortID(id)
	var commandNames []string
	for _, c := range commands() {
		commandNames = append(commandNames, c.name)
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{""}, sorted(append(commandNames, "help")...)},
		{[]string{"fo"}, []string{"fork"}},
		{[]string{"-"}, sorted("--db", "--record", "--help", "--version")},
		{[]string{"--db", ""}, []string{"files"}},
		{[]string{"--db", db, "sh"}, []string{"show"}},
		{[]string{"fork", short, "--har"}, []string{"--harness"}},
		{[]string{"fork", short, "--harness", ""}, sorted(harnessNames()...)},
		{[]string{"fork", short, "--harness", "c"}, []string{"claude", "codex"}},
		{[]string{"fork", short, "--at", ""}, []string{"end", "last_user"}},
		{[]string{"fork", short, "--score", ""}, []string{"exit", "number"}},
		{[]string{"fork", short, "--format=", ""}, nil}, // not a flag of fork's: cur is an argument, and fork takes one
		{[]string{"fork", short, "--harness=c"}, nil},
		{[]string{"export", short, "--format", ""}, []string{"json", "md"}},
		{[]string{"export", short, "-o", ""}, []string{"files"}},
		{[]string{"import", ""}, []string{"files"}},
		{[]string{"import", "--format", "cl"}, []string{"claude"}},
		{[]string{"completion", ""}, sorted("bash", "fish", "zsh")},
		{[]string{"worktree", ""}, []string{"prune", "rm"}},
		{[]string{"worktree", "prune", ""}, nil},
		{[]string{"ls", ""}, nil},
		{[]string{"show", "rome"}, []string{"rome-only", "rome-too"}},
		{[]string{"show", "rome-o"}, []string{"rome-only"}},
		{[]string{"show", short}, []string{short}},
		{[]string{"show", id[:10]}, []string{id}},
		{[]string{"show", "x:"}, []string{"x:one"}},
		{[]string{"show", "-"}, []string{"--db", "--json"}},
		{[]string{"show", "--", "-"}, []string{"-dash"}},
		{[]string{"compare", "rome-only", "rome-t"}, []string{"rome-too"}},
		{[]string{"worktree", "rm", "rome-t"}, []string{"rome-too"}},
		{[]string{"--db", filepath.Join(t.TempDir(), "none.db"), "show", ""}, nil},
		{[]string{"show", "--db", filepath.Join(t.TempDir(), "none.db"), ""}, nil},
	} {
		assert.Equal(t, tc.want, completeValues(t, db, tc.words...), "%q", tc.words)
	}
	// Every run, by short id, and every name that is not read as a flag.
	all := completeValues(t, db, "show", "")
	assert.Len(t, all, 5+3)
	assert.Contains(t, all, short)
	assert.NotContains(t, all, "-dash")
}

// TestCompleteMakesNoDatabase: completion reads the store; a --db that
// names no file stays no file.
func TestCompleteMakesNoDatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "sub", "t.db")
	assert.Nil(t, completeValues(t, db, "show", ""))
	_, err := os.Stat(filepath.Dir(db))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestCompletedFlagsAreTheCommandsOwn: for every command, the flags
// completion offers are those its --help lists (both read the command's
// own flag set), hidden ones left out of both.
func TestCompletedFlagsAreTheCommandsOwn(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "t.db")
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)`)
	for _, c := range commands() {
		help, _, code := tine(t, db, c.name, "--help")
		require.Equal(t, 0, code, c.name)
		var want []string
		for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
			want = append(want, dashed(m[1]))
		}
		slices.Sort(want)
		require.NotEmpty(t, want, c.name)
		assert.Equal(t, want, completeValues(t, db, c.name, "-"), c.name)
	}
	assert.NotContains(t, completeValues(t, db, "fork", "x", "-"), "--paced", "a flag for tine's own processes")
}

// tineOnPath is a folder holding "tine", this test binary standing in for
// it (TestMain), for a shell to run.
func tineOnPath(t *testing.T) (dir string, env []string) {
	t.Helper()
	self, err := filepath.Abs(os.Args[0])
	require.NoError(t, err)
	dir = t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "tine")))
	return dir, append(os.Environ(), "TINE_TEST_AS_TINE=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// shell runs sh with args (skipping the test when it is not installed),
// the test binary as tine on db.
func shell(t *testing.T, sh, db string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(sh); err != nil {
		t.Skipf("%s is not installed", sh)
	}
	_, env := tineOnPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard only
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, args...)
	cmd.Env = append(env, "TINE_DB="+db, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestCompletionScriptsParse: each script is valid in its shell.
func TestCompletionScriptsParse(t *testing.T) {
	t.Parallel()
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			script, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "completion", sh)
			require.Equal(t, 0, code, errOut)
			path := filepath.Join(t.TempDir(), "tine."+sh)
			require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
			shell(t, sh, "", "-n", path)
		})
	}
	_, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "completion", "tcsh")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `no script for "tcsh": bash, zsh or fish`)
}

// TestBashCompletes drives bash's completion as bash does: COMP_LINE,
// COMP_POINT and COMP_WORDS split at bash's word breaks (= and :).
func TestBashCompletes(t *testing.T) {
	t.Parallel()
	db, _ := completeSeed(t)
	script := `source <(tine completion bash)
line=$1; shift
COMP_LINE=$line COMP_POINT=${#line} COMP_WORDS=("$@") COMP_CWORD=$(($# - 1))
_tine
printf '%s\n' "${COMPREPLY[@]}"`
	complete := func(line string, words ...string) []string {
		out := strings.Fields(shell(t, "bash", db, append([]string{"-c", script, "bash", line}, words...)...))
		slices.Sort(out)
		return out
	}
	assert.Equal(t, []string{"--harness"}, complete("tine fork rome-only --harn", "tine", "fork", "rome-only", "--harn"))
	assert.Equal(t, []string{"rome-only", "rome-too"}, complete("tine show rom", "tine", "show", "rom"))
	assert.Equal(t, []string{"show"}, complete("tine sh", "tine", "sh"))
	// bash replaces only what follows the colon: the candidate is cut there.
	assert.Equal(t, []string{"one"}, complete("tine show x:o", "tine", "show", "x", ":", "o"))
	// A new word after a space.
	assert.Equal(t, []string{"bash", "fish", "zsh"}, complete("tine completion ", "tine", "completion", ""))
}

// TestFishCompletes asks fish itself what it completes (complete -C).
func TestFishCompletes(t *testing.T) {
	t.Parallel()
	db, _ := completeSeed(t)
	out := shell(t, "fish", db, "-c", `tine completion fish | source; complete -C"tine show rom"; complete -C"tine fork rome-only --harn"`)
	assert.Regexp(t, `(?m)^rome-only\t\S+ · `, out, "a fork's name, said by its id and title")
	assert.Contains(t, out, "rome-too\t")
	assert.Regexp(t, `(?m)^--harness\tthe harness that runs the turns`, out)
}

// TestZshCompletes runs the zsh script's function with the completion
// system's two entry points it calls (_describe, _files) standing in,
// printing what they are given.
func TestZshCompletes(t *testing.T) {
	t.Parallel()
	db, _ := completeSeed(t)
	out := shell(t, "zsh", db, "-c", `compdef() { :; }
source <(tine completion zsh)
_describe() { print -rl -- "${(@P)${@[-1]}}"; }
_files() { print FILES; }
words=(tine show rom); CURRENT=3; _tine
words=(tine show x:); CURRENT=3; _tine
words=(tine import ""); CURRENT=3; _tine`)
	assert.Regexp(t, `(?m)^rome-only:\S+ · `, out)
	assert.Contains(t, out, "rome-too:")
	assert.Contains(t, out, `x\:one:`, "a colon in a value is escaped for _describe")
	assert.Contains(t, out, "FILES")
}
