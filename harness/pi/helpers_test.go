package pi

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// mainLine is the main run of a session file as the parser reads it.
func mainLine(t *testing.T, path string) []model.Message {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err)
	require.Empty(t, pf.Skipped)
	require.NotEmpty(t, pf.Runs)
	return pf.Runs[0].Messages
}

func evalDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	return real
}

// sameMessages compares what a turn emitted with what the parser reads.
func sameMessages(t *testing.T, want, got []model.Message) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		assert.Equal(t, w.Role, g.Role, "message %d", i+1)
		assert.Equal(t, w.Parts, g.Parts, "message %d", i+1)
		assert.Equal(t, w.NativeID, g.NativeID, "message %d", i+1)
		assert.Equal(t, w.Model, g.Model, "message %d", i+1)
		assert.Equal(t, w.Usage, g.Usage, "message %d", i+1)
		assert.True(t, w.Time.Equal(g.Time), "message %d: time %s, parser %s", i+1, g.Time, w.Time)
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(data)
}
