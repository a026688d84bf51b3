package pi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestOpenFindsTheSessionFile: pi opens a session by its file (an id is
// looked up in the cwd's folder only), so o finds the file: the one the
// run was imported from when that is the session's, else the session's in
// pi's folders, wherever the run's worktree is.
func TestOpenFindsTheSessionFile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	const id = "0199aaaa-bbbb"
	inPi := filepath.Join(home, ".pi", "agent", "sessions", "--work-app--", "2026-11-20T10-00-00-000Z_"+id+".jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(inPi), 0o700))
	require.NoError(t, os.WriteFile(inPi, []byte("{}\n"), 0o600))
	imported := filepath.Join(t.TempDir(), "old_"+id+".jsonl")
	require.NoError(t, os.WriteFile(imported, []byte("{}\n"), 0o600))

	got, err := openFile(model.Run{NativeID: id, Cwd: "/work/app", Source: imported}, getenv)
	require.NoError(t, err)
	assert.Equal(t, imported, got, "the file it was imported from")

	got, err = openFile(model.Run{NativeID: id, Worktree: "/data/worktrees/app-fork-1"}, getenv)
	require.NoError(t, err)
	assert.Equal(t, inPi, got, "a fork's session, found in pi's folders")

	got, err = openFile(model.Run{NativeID: id, Source: filepath.Join(t.TempDir(), "gone_"+id+".jsonl")}, getenv)
	require.NoError(t, err)
	assert.Equal(t, inPi, got, "a source that is gone is not used")

	_, err = openFile(model.Run{NativeID: "0199cccc", Cwd: "/work/app"}, getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pi's session file for 0199cccc is missing")

	_, err = openFile(model.Run{NativeID: "../*", Cwd: "/work/app"}, getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a pi session id")

	argv, err := Agent.Open(model.Run{NativeID: id, Source: imported}, "/opt/pi")
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/pi", "--session", imported}, argv)
}
