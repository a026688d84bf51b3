package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestADatabaseThisUserCannotWriteIsRead (issue 27, item 6): a database
// the user may read but not write is read (ls, show, export, checkpoints,
// gc --dry-run), and every command that writes refuses it, saying why, in
// one line; nothing is written, nor made beside it. Two ways a user cannot
// write it: the file's mode (and its folder's), and a file of the user's
// own in a folder the user cannot write, where SQLite cannot make its log.
//
// What it proves: the kernel refuses the writes, not tine's idea of them.
// Root writes whatever the modes say, so run as root (as these tests
// usually are) the commands run as nobody: a copy of this test binary
// standing in for tine, on a database in a folder of root's, mode 0644
// (nobody may read the file, write neither it nor the folder) or owned by
// nobody (it may write the file, not the folder). Run as another user, the
// file is made 0444 and its folder 0555, or only the folder 0555.
func TestADatabaseThisUserCannotWriteIsRead(t *testing.T) {
	t.Parallel()
	seed, id := importSeed(t)
	chatData, err := os.ReadFile("testdata/openai/chat.jsonl")
	require.NoError(t, err)
	clean, err := os.ReadFile(seed)
	require.NoError(t, err)
	for _, tc := range []struct{ name, why string }{
		{"file", "permission denied"},
		{"folder", "SQLite cannot make its log in the file's folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db, chat := filepath.Join(dir, "t.db"), filepath.Join(dir, "chat.jsonl")
			require.NoError(t, os.WriteFile(db, clean, 0o600))
			require.NoError(t, os.WriteFile(chat, chatData, 0o644))
			run := readOnlyTine(t, db, tc.name == "folder")
			for _, args := range [][]string{{"ls"}, {"show", id}, {"export", id}, {"checkpoints", id}, {"gc", "--dry-run"}} {
				out, errOut, code := run(args...)
				assert.Equal(t, 0, code, "%v: %s", args, errOut)
				assert.Empty(t, errOut, "%v", args)
				assert.NotEmpty(t, out, "%v", args)
			}
			out, _, _ := run("ls")
			assert.Contains(t, out, "What is the weather in Paris, Rome and Oslo?")
			want := "tine: this tine can read the database " + db + " but not write it (" + tc.why + "): nothing is written to it\n"
			for _, args := range [][]string{{"import", chat}, {"fork", id, "--harness", "script"}, {"gc"}, {"worktree", "prune"}} {
				_, errOut, code := run(args...)
				assert.Equal(t, 1, code, "%v", args)
				assert.Equal(t, want, errOut, "%v", args)
			}
			now, err := os.ReadFile(db)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(clean, now), "the file is as it was")
			left, err := filepath.Glob(db + "*")
			require.NoError(t, err)
			assert.Equal(t, []string{db}, left, "nothing made beside it")
		})
	}
}

// readOnlyTine returns what runs tine on db as a user who may read db but
// not write it (folder: may write the file but not its folder), as the
// kernel holds that user to the files' modes: nobody when this test runs
// as root (which the modes do not hold), this user otherwise.
func readOnlyTine(t *testing.T, db string, folder bool) func(args ...string) (string, string, int) {
	t.Helper()
	dir := filepath.Dir(db)
	if os.Geteuid() != 0 {
		mode := os.FileMode(0o444)
		if folder {
			mode = 0o644
		}
		require.NoError(t, os.Chmod(db, mode))
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return func(args ...string) (string, string, int) { return tine(t, db, args...) }
	}
	const nobody = 65534
	require.NoError(t, os.Chmod(db, 0o644))
	if folder {
		require.NoError(t, os.Chown(db, nobody, nobody))
	}
	// A copy of this binary nobody may run, and a home of its own.
	bin := filepath.Join(t.TempDir(), "tine")
	self, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, self, bin, 0o755)
	home := t.TempDir()
	require.NoError(t, os.Chown(home, nobody, nobody))
	// nobody must get through the test's folders (made 0700) to them.
	for _, p := range []string{dir, filepath.Dir(bin), home} {
		for d := p; d != filepath.Dir(d); d = filepath.Dir(d) {
			info, err := os.Stat(d)
			require.NoError(t, err)
			if info.Mode().Perm()&0o005 != 0o005 {
				require.NoError(t, os.Chmod(d, info.Mode().Perm()|0o055))
			}
		}
	}
	return func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, append([]string{"--db", db}, args...)...)
		cmd.Env = []string{"TINE_TEST_AS_TINE=1", "HOME=" + home, "PATH=" + os.Getenv("PATH")}
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return out.String(), errOut.String(), code
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
