package opencode

// The faults a turn meets, as the other agents' tests have them: shims
// (shell scripts in opencode's place) for what the real CLI cannot be
// made to do on cue, and the real CLI where it can (garbage before its
// events, killed mid-stream, its model server down).

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// shim writes an executable script standing in for opencode.
func shim(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

func shimTurn(t *testing.T, bin string, stall time.Duration) ([]harness.Event, error) {
	t.Helper()
	home := t.TempDir()
	h := New(Config{Bin: bin, Stall: stall, Grace: time.Second, Env: []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data")}})
	var evs []harness.Event
	err := h.Turn(context.Background(), harness.TurnRequest{Run: model.Run{Harness: Harness}, Input: "hi", Dir: t.TempDir()}, func(e harness.Event) { evs = append(evs, e) })
	return evs, err
}

func TestFaultsWithShims(t *testing.T) {
	t.Parallel()
	t.Run("non-zero exit names the stderr tail", func(t *testing.T) {
		t.Parallel()
		_, err := shimTurn(t, shim(t, `echo "Error: Unexpected error Missing key at [\"slug\"]" >&2; exit 3`), time.Minute)
		var exit *agentproc.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, 3, exit.Code)
		assert.Contains(t, err.Error(), "Missing key")
	})
	t.Run("an error event says why", func(t *testing.T) {
		t.Parallel()
		_, err := shimTurn(t, shim(t, `echo '{"type":"error","sessionID":"ses_x","error":{"name":"APIError","data":{"message":"Cannot connect to API"}}}'; exit 1`), time.Minute)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "APIError: Cannot connect to API", "what it said, not only its status")
	})
	t.Run("a stall is stopped", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		_, err := shimTurn(t, shim(t, `echo '{"type":"step_start","sessionID":"ses_x"}'; sleep 60`), 2*time.Second)
		require.ErrorIs(t, err, agentproc.ErrStalled)
		assert.Less(t, time.Since(start), 40*time.Second)
	})
	t.Run("an end without a session", func(t *testing.T) {
		t.Parallel()
		_, err := shimTurn(t, shim(t, `echo 'booting...'; exit 0`), time.Minute)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "without starting a session")
	})
	t.Run("killed mid-stream", func(t *testing.T) {
		t.Parallel()
		_, err := shimTurn(t, shim(t, `echo '{"type":"step_start","sessionID":"ses_x"}'; kill -9 $$`), time.Minute)
		require.Error(t, err)
	})
}
