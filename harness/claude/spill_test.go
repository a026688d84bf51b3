package claude

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// TestParseStreamReadsWhatParseReads parses every Claude Code file of the
// test corpora (rewinds, forks, compactions, subagents, inline sidechains,
// cycles, malformed lines) with Parse and with ParseStream spilling every
// message's parts from the first byte, and checks that the runs are the
// same: titles, usage, models, times, links, and every message, read back
// from the streams a few at a time, last ones first.
func TestParseStreamReadsWhatParseReads(t *testing.T) {
	// Not parallel: SpillFrom is the process's.
	defer SpillFrom(0)()
	var files []string
	for _, dir := range []string{"../../testdata/claude", "testdata/turn"} {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
				files = append(files, path)
			}
			return err
		}))
	}
	require.Greater(t, len(files), 20)
	streamed := 0
	for _, path := range files {
		want, err := ParseFile(path)
		require.NoError(t, err, path)
		f, err := os.Open(path)
		require.NoError(t, err)
		got, err := ParseStream(f, path)
		f.Close()
		require.NoError(t, err, path)
		require.Len(t, got.Runs, len(want.Runs), path)
		for i := range got.Runs {
			if got.Runs[i].Stream != nil {
				streamed++
				got.Runs[i].Messages = readBack(t, got.Runs[i])
				got.Runs[i].Stream = nil
			}
		}
		require.NoError(t, got.Close())
		got.Held = nil
		require.Equal(t, want, got, path)
	}
	require.Greater(t, streamed, 20)
}

// readBack reads a run's stream three messages at a time, from the end.
func readBack(t *testing.T, r harness.ParsedRun) []model.Message {
	t.Helper()
	n := r.Stream.Len()
	var chunks [][]model.Message
	for to := n; to > 0; to -= 3 {
		msgs, err := r.Stream.Messages(max(0, to-3), to)
		require.NoError(t, err)
		chunks = append(chunks, append([]model.Message(nil), msgs...))
	}
	var all []model.Message
	for i := len(chunks) - 1; i >= 0; i-- {
		all = append(all, chunks[i]...)
	}
	return all
}
