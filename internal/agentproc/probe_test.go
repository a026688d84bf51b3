package agentproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionAsksOncePerVersionOfTheFile: a CLI's --version is asked once
// while its file stays the same (a node start, seconds on a busy machine,
// each time a dialog opened), and again when it changes.
func TestVersionAsksOncePerVersionOfTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, count := filepath.Join(dir, "fakecli"), filepath.Join(dir, "count")
	write := func(version string) {
		require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho run >> "+count+"\necho 'fakecli "+version+"'\n"), 0o755))
	}
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "run")
	}
	write("1.0")
	for range 3 {
		path, v, err := Version(context.Background(), Spec{Name: "fakecli", Bin: bin})
		require.NoError(t, err)
		assert.Equal(t, bin, path)
		assert.Equal(t, "fakecli 1.0", v)
	}
	assert.Equal(t, 1, runs())
	write("2.0.1") // another size: another version of the file
	_, v, err := Version(context.Background(), Spec{Name: "fakecli", Bin: bin})
	require.NoError(t, err)
	assert.Equal(t, "fakecli 2.0.1", v)
	assert.Equal(t, 2, runs())
}

// TestProbedWaitsAWhileAndKeepsTheAnswer: a caller waits at most its
// while, told the answer did not come in time (not that the CLI cannot
// run); the question goes on, and its answer is the next caller's
// without asking again.
func TestProbedWaitsAWhileAndKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "cli")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o755))
	release := make(chan struct{})
	var asked atomic.Int32
	ask := func(context.Context) (string, error) {
		asked.Add(1)
		<-release
		return "cli 3.1", nil
	}
	_, err := Probed(context.Background(), file, "--version", time.Millisecond, ask)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	v, err := Probed(context.Background(), file, "--version", time.Minute, ask)
	require.NoError(t, err)
	assert.Equal(t, "cli 3.1", v)
	assert.Equal(t, int32(1), asked.Load())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	_, err = Probed(ctx, file, "another question", time.Minute, func(context.Context) (string, error) { <-never; return "", nil })
	assert.True(t, errors.Is(err, context.Canceled), "a caller that gives up is told so: %v", err)
}
