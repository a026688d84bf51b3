package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"tine/model"
)

// openTemp opens a fresh store in a test's temporary folder.
func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "tine.db")
	s, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// conversation makes n messages cycling user, assistant (thinking + tool
// call), tool result, assistant (text): 1.5 parts a message on average.
func conversation(n int, tag string) []model.Message {
	msgs := make([]model.Message, n)
	for i := range msgs {
		at := base.Add(time.Duration(i) * time.Second)
		call := fmt.Sprintf("call_%s_%d", tag, i/4)
		switch i % 4 {
		case 0:
			msgs[i] = model.Message{Role: model.User, Time: at, NativeID: fmt.Sprintf("%s-u%d", tag, i),
				Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprintf("%s question %d: please look at the file", tag, i)}}}
		case 1:
			msgs[i] = model.Message{Role: model.Assistant, Time: at, Model: "model-x", NativeID: fmt.Sprintf("%s-a%d", tag, i),
				Usage: model.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 50},
				Parts: []model.Part{
					{Kind: model.Thinking, Text: "I should read the file first."},
					{Kind: model.ToolCall, ToolCallID: call, ToolName: "read", ToolInput: `{"path":"main.go"}`},
				}}
		case 2:
			msgs[i] = model.Message{Role: model.Tool, Time: at,
				Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: call, ToolName: "read", Text: "package main\n\nfunc main() {}\n"}}}
		case 3:
			msgs[i] = model.Message{Role: model.Assistant, Time: at, Model: "model-x",
				Usage: model.Usage{InputTokens: 150, OutputTokens: 40, CacheWriteTokens: 7},
				Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprintf("%s answer %d: the file is empty", tag, i)}}}
		}
	}
	return msgs
}

// requireSameMessages compares transcripts, times by instant.
func requireSameMessages(t testing.TB, want, got []model.Message) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, w.Time.Equal(g.Time), "message %d time: want %v, got %v", i, w.Time, g.Time)
		w.Time, g.Time = time.Time{}, time.Time{}
		require.Equal(t, w, g, "message %d", i)
	}
}

// count returns the rows of table.
func count(t testing.TB, s *Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, s.r.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// dbBytes is the database's logical size.
func dbBytes(t testing.TB, s *Store) int64 {
	t.Helper()
	var pages, size int64
	ctx := context.Background()
	require.NoError(t, s.r.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, s.r.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size))
	return pages * size
}

// createRoot stores a root run with n generated messages.
func createRoot(t testing.TB, s *Store, n int, tag string) (model.Run, []model.Message) {
	t.Helper()
	r := model.Run{Harness: "script", Cwd: "/src/project", Title: tag + " title", CreatedAt: base}
	msgs := conversation(n, tag)
	require.NoError(t, s.CreateRun(context.Background(), &r, msgs))
	return r, msgs
}

// column reads the one column query selects from db.
func column[T any](t testing.TB, db *sql.DB, query string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}
