package place_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/place"
)

// TestACheckWhoseDirectoryIsGoneSaysSo: a check cannot run in a directory
// that does not exist (a made-up run's, a deleted checkout's); it says
// so, not "fork/exec /bin/sh: no such file or directory", which reads as
// if the shell were missing.
func TestACheckWhoseDirectoryIsGoneSaysSo(t *testing.T) {
	t.Parallel()
	gone := filepath.Join(t.TempDir(), "gone")
	c := place.RunCheck(context.Background(), gone, "true", false, time.Minute)
	assert.True(t, c.Ran)
	assert.Equal(t, -1, c.Exit)
	assert.Nil(t, c.Score)
	assert.Equal(t, "its directory "+gone+" does not exist, so it cannot run there", c.Error)
	c = place.RunCheck(context.Background(), filepath.Dir(gone), "true", false, time.Minute)
	assert.Empty(t, c.Error, "one that is there runs it")
	require.NotNil(t, c.Score)
	assert.Equal(t, 1.0, *c.Score)
}
