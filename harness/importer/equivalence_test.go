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
	dir := equivalenceCorpus(t)

	want := importRows(t, dir, func() func() { return claude.DecodeInParallelFrom(1 << 62) })
	got := importRows(t, dir, func() func() { return claude.DecodeInParallelFrom(0) })
	require.Greater(t, len(want["messages"]), 500)
	sameRows(t, "sequential", want, "parallel", got)
}

// TestSpilledStoresTheSame imports the corpus of
// TestParallelDecodeStoresTheSame with every message held in memory, with
// every message's parts spilled to disk and stored from the runs'
// streams, and with them spilled half-way through the long session (some
// held, some spilled), and checks that the three databases hold the same
// rows in every table. The spill files are gone once the import returns:
// none is left in TMPDIR, and none is still open.
func TestSpilledStoresTheSame(t *testing.T) {
	// Not parallel: SpillFrom is the process's, TMPDIR is set.
	dir := equivalenceCorpus(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	want := importRows(t, dir, func() func() { return claude.SpillFrom(1 << 62) })
	require.Greater(t, len(want["messages"]), 500)
	for _, from := range []int64{0, 3 << 20} {
		got := importRows(t, dir, func() func() { return claude.SpillFrom(from) })
		sameRows(t, "held", want, fmt.Sprintf("spilled from %d", from), got)
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, left, "spill files left in TMPDIR")
	}
}

// openSpills lists the spill files this process has open (Linux: its
// /proc/self/fd links).
func openSpills(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.Contains(target, "tine-import-") {
			open = append(open, target)
		}
	}
	return open
}

// equivalenceCorpus is a folder of Claude sessions with rewinds, forks,
// compactions, subagents, inline sidechains, cycles, malformed lines, and a
// 6 MB session with garbage, blank, duplicated and unfinished lines.
func equivalenceCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, from := range []string{"claude/projects", "claude/edge", "claude/extra/projects"} {
		copyTree(t, filepath.Join("../../testdata", from), filepath.Join(dir, strings.ReplaceAll(from, "/", "-")))
	}
	long := filepath.Join(dir, "long")
	writeClaudeCorpus(t, long, 1, 6<<20)
	damage(t, long)
	return dir
}

// importRows imports every file under dir into a new database, with what
// setup sets (undone by what it returns), checks that it left no spill
// file open, and reads its rows (tableRows).
func importRows(t *testing.T, dir string, setup func() (restore func())) map[string][]string {
	t.Helper()
	restore := setup()
	defer restore()
	path := filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(path)
	require.NoError(t, err)
	files, err := Expand([]string{dir})
	require.NoError(t, err)
	sum, err := Import(context.Background(), st, files, Options{Formats: formats})
	require.NoError(t, err)
	require.Positive(t, sum.Runs)
	// Before anything else: an open file left behind would be closed by
	// the garbage collector sooner or later.
	require.Empty(t, openSpills(t), "spill files still open")
	require.NoError(t, st.Close())
	return tableRows(t, path)
}

// sameRows fails unless want and got hold the same rows in every table.
func sameRows(t *testing.T, wantName string, want map[string][]string, gotName string, got map[string][]string) {
	t.Helper()
	for table, rows := range want {
		other := got[table]
		for i := range min(len(rows), len(other)) {
			if rows[i] != other[i] {
				t.Fatalf("table %s, row %d of %d:\n%s %.600s\n%s %.600s", table, i, len(rows), wantName, rows[i], gotName, other[i])
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
// by what is read from the files; when a file was imported, and in which
// order runs were written (change_seq, run_change_seq), is left out.
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
		AND name NOT LIKE 'sqlite_%' AND name != 'run_change_seq' AND (name NOT LIKE 'message_fts%' OR name = 'message_fts_docsize')`)
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
				if table == "sources" && cols[i] == "imported_at" || table == "runs" && cols[i] == "change_seq" {
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
