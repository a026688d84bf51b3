package importer

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"tine/harness/claude"
	"tine/store"
)

// TestParallelDecodeStoresTheSame imports a corpus of Claude sessions
// twice, once with every file's lines decoded one by one and once with
// them decoded on every core (as a file past 4 MB is), and checks that the
// two databases hold the same rows in every table, the full-text index's
// documents included. The corpus has rewinds, forks, compactions,
// subagents, inline sidechains, cycles, malformed lines, and a long
// session with garbage, blank, duplicated and unfinished lines.
func TestParallelDecodeStoresTheSame(t *testing.T) {
	// Not parallel: DecodeInParallelFrom is the process's.
	dir := t.TempDir()
	for _, from := range []string{"claude/projects", "claude/edge", "claude/extra/projects"} {
		copyTree(t, filepath.Join("../../testdata", from), filepath.Join(dir, strings.ReplaceAll(from, "/", "-")))
	}
	long := filepath.Join(dir, "long")
	writeClaudeCorpus(t, long, 1, 6<<20)
	damage(t, long)

	dump := func(from int64) map[string][]string {
		restore := claude.DecodeInParallelFrom(from)
		defer restore()
		path := filepath.Join(t.TempDir(), "t.db")
		st, err := store.Open(path)
		require.NoError(t, err)
		files, err := Expand([]string{dir})
		require.NoError(t, err)
		sum, err := Import(context.Background(), st, files, Options{Formats: formats})
		require.NoError(t, err)
		require.Positive(t, sum.Runs)
		require.NoError(t, st.Close())
		return tableRows(t, path)
	}
	want := dump(1 << 62)
	got := dump(0)
	require.Greater(t, len(want["messages"]), 500)
	for table, rows := range want {
		other := got[table]
		for i := range min(len(rows), len(other)) {
			if rows[i] != other[i] {
				t.Fatalf("table %s, row %d of %d:\nsequential %.600s\nparallel   %.600s", table, i, len(rows), rows[i], other[i])
			}
		}
		require.Len(t, other, len(rows), "rows of table %s", table)
	}
	require.Equal(t, len(want), len(got))
}

// damage adds to each session file under dir lines that are not records:
// broken JSON, blank lines, a record written twice, and an unfinished last line.
func damage(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var out []byte
		for i, l := range bytes.SplitAfter(data, []byte("\n")) {
			out = append(out, l...)
			switch i % 101 {
			case 7:
				out = append(out, "{\"type\":\"user\",\"uuid\":\"x\",broken\n"...)
			case 13:
				out = append(out, "\n  \n"...)
			case 29:
				out = append(out, l...)
			}
		}
		out = append(out, `{"type":"user","uuid":"unfinished"`...)
		return os.WriteFile(path, out, 0o644)
	})
	require.NoError(t, err)
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.CopyFS(to, os.DirFS(from)))
}

// tableRows reads every row of every table of the database at path, as
// text, sorted. Run ids (random) become their place among the runs sorted
// by what is read from the files; when a file was imported is left out.
func tableRows(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	names := map[string]string{}
	rows, err := db.QueryContext(ctx, `SELECT id FROM runs ORDER BY source, native_id, fork_at, own_messages, title, created_at, cwd`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		names[id] = fmt.Sprintf("run#%d", len(names))
	}
	require.NoError(t, rows.Err())
	rows.Close()
	var tables []string
	rows, err = db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND (name NOT LIKE 'message_fts%' OR name = 'message_fts_docsize')`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM `+table)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			var b strings.Builder
			for i, v := range vals {
				if table == "sources" && cols[i] == "imported_at" {
					continue
				}
				s := fmt.Sprint(v)
				if bs, ok := v.([]byte); ok {
					s = string(bs)
				}
				if n, ok := names[s]; ok {
					s = n
				}
				fmt.Fprintf(&b, "%s=%q ", cols[i], s)
			}
			out[table] = append(out[table], b.String())
		}
		require.NoError(t, rows.Err())
		rows.Close()
		slices.Sort(out[table])
	}
	return out
}
