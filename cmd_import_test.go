package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/model"
	"tine/store"
)

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o644))
}

// TestImportExitsOneWhenAFileFailed: the summary says what was imported,
// and the status tells a script that not everything was.
func TestImportExitsOneWhenAFileFailed(t *testing.T) {
	dir := t.TempDir()
	copyTo(t, "testdata/openai/seed-example.json", filepath.Join(dir, "good.json"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("nope\n"), 0o644))
	db := filepath.Join(t.TempDir(), "t.db")

	out, errOut, code := tine(t, db, "import", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "imported 1 run, 6 messages from 2 files")
	assert.Contains(t, out, "1 failed")
	assert.Contains(t, errOut, "bad.jsonl: not a transcript tine knows")
	assert.Contains(t, errOut, "tine: import: 1 failed (listed above); the rest was imported")

	out, errOut, code = tine(t, db, "import", dir, "--json")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"failed": 1`)
	assert.Equal(t, "tine: import: 1 failed (the summary's errors); the rest was imported\n", errOut)
}

// TestImportSkipsAFIFO: a named pipe among the files is skipped, saying
// so; it used to hang the import until kill -9.
func TestImportSkipsAFIFO(t *testing.T) {
	dir := t.TempDir()
	copyTo(t, "testdata/openai/seed-example.json", filepath.Join(dir, "good.json"))
	fifo := filepath.Join(dir, "pipe.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	db := filepath.Join(t.TempDir(), "t.db")

	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := tine(t, db, "import", dir)
		done <- result{out, errOut, code}
	}()
	select {
	case r := <-done:
		assert.Equal(t, 0, r.code, r.errOut)
		assert.Contains(t, r.out, "imported 1 run,")
		assert.Contains(t, r.out, "skipped 1 path that is not a file tine can read:\n  "+fifo+": a named pipe (FIFO), not a file")
	case <-time.After(20 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("tine import hung on a FIFO")
	}
}

// TestImportErrorsNeverCarryEscapes: a file name holding an OSC sequence
// reached the terminal in an import error.
func TestImportErrorsNeverCarryEscapes(t *testing.T) {
	dir := t.TempDir()
	name := "x\x1b]0;pwned\x07\x1b[2J\u009b31m\r.jsonl"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("nope\n"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "y\x1b]52;c;Y3Vy\x07.jsonl"), 0o644))
	db := filepath.Join(t.TempDir(), "t.db")

	out, errOut, code := tine(t, db, "import", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a transcript tine knows")
	assert.Contains(t, out, "named pipe")
	for _, s := range []string{out, errOut} {
		for _, bad := range []string{"\x1b", "\x07", "\r", "\u009b"} {
			assert.NotContains(t, s, bad)
		}
	}
}

// TestImportIntoADamagedDatabase damages each page of a database in turn
// and imports into it: whatever SQLite notices is said in one line, exit
// status 1, and nothing more is tried; what it does not notice imports.
func TestImportIntoADamagedDatabase(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base.db")
	_, errOut, code := tine(t, base, "import", "testdata/openai/seed-example.json")
	require.Equal(t, 0, code, errOut)
	failed := 0
	eachPageDamaged(t, base, func(p int, db string) {
		out, errOut, code := tine(t, db, "import", "testdata/openai")
		if code == 0 {
			return
		}
		failed++
		assert.Equal(t, 1, code, "page %d", p)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		assert.Len(t, lines, 1, "page %d: one line: %s", p, errOut)
		assert.Contains(t, errOut, "malformed", "page %d", p)
		assert.NotContains(t, out, "No .jsonl or .json files there", "page %d: stopped, not empty", p)
	})
	assert.Positive(t, failed, "some damage is noticed")
}

// eachPageDamaged calls fn with a copy of the database base (closed) for
// each of its pages but the first, that page overwritten.
func eachPageDamaged(t *testing.T, base string, fn func(page int, db string)) {
	t.Helper()
	clean, err := os.ReadFile(base)
	require.NoError(t, err)
	const size = 4096
	for p := 1; p*size < len(clean); p++ {
		data := append([]byte(nil), clean...)
		for i := p * size; i < (p+1)*size && i < len(data); i++ {
			data[i] = byte(i*7 + p)
		}
		db := filepath.Join(t.TempDir(), "t.db")
		require.NoError(t, os.WriteFile(db, data, 0o600))
		fn(p, db)
	}
}

// TestEveryWriteRefusesADatabaseFoundDamaged (issue 27, item 5): once a
// command has found the file damaged (show, reading a damaged page), every
// command that writes refuses it with the same line, exit status 1,
// before it does anything (an import touching other pages wrote on and
// exited 0; prune would remove a worktree it could not then record), while
// ls still reads it. Each page is damaged in turn.
func TestEveryWriteRefusesADatabaseFoundDamaged(t *testing.T) {
	t.Parallel()
	base, _, forks := agentForks(t, []string{"a"})
	id, wt := forks["a"].ParentID, forks["a"].Worktree
	found := 0
	eachPageDamaged(t, base, func(p int, db string) {
		_, said, code := tine(t, db, "show", id)
		if code == 0 || !strings.Contains(said, "the database file is damaged") {
			return
		}
		found++
		said = strings.TrimPrefix(said[strings.Index(said, "the database file is damaged"):], "\n")
		for _, args := range [][]string{
			{"import", "testdata/openai/chat.jsonl"},
			{"fork", id, "--harness", "script"},
			{"gc"},
			{"worktree", "prune"},
		} {
			_, errOut, code := tine(t, db, args...)
			assert.Equal(t, 1, code, "page %d: %v", p, args)
			assert.True(t, strings.HasSuffix(errOut, said), "page %d: %v: %q, not %q", p, args, errOut, said)
		}
		st, err := store.Open(db)
		require.NoError(t, err)
		runs, err := st.Runs(context.Background())
		st.Close()
		if err == nil {
			assert.Len(t, runs, 2, "page %d: nothing was written", p)
			out, errOut, code := tine(t, db, "ls")
			assert.Equal(t, 0, code, "page %d: ls reads what it can: %s", p, errOut)
			assert.Contains(t, out, model.ShortID(id))
		}
		assert.FileExists(t, filepath.Join(wt, "out-a.txt"), "page %d: the worktree stays", p)
	})
	assert.Positive(t, found, "some damage is found by show")
}

// TestReimportOfUnchangedFilesSkipsTheStore: a second import of the same
// files says they are unchanged without opening the store, exactly as the
// store would say it; a file that grew afterwards, or a store written
// since, sends the import through the store again.
func TestReimportOfUnchangedFilesSkipsTheStore(t *testing.T) {
	dir := t.TempDir()
	copyTo(t, "testdata/openai/seed-example.json", filepath.Join(dir, "a.json"))
	copyTo(t, "testdata/openai/seed-example.json", filepath.Join(dir, "b.json"))
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := tine(t, db, "import", dir)
	require.Equal(t, 0, code, errOut)
	opened := storeImports.Load()
	out, errOut, code := tine(t, db, "import", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "imported 0 runs, 0 messages from 2 files (0.0 MB in 0.00s); 2 unchanged\n", out)
	fast, _, _ := tine(t, db, "import", dir, "--json")
	assert.Equal(t, opened, storeImports.Load(), "the store was not opened")
	require.NoError(t, os.Remove(db+"-scan"))
	slow, _, _ := tine(t, db, "import", dir, "--json")
	assert.Equal(t, opened+1, storeImports.Load())
	seconds := regexp.MustCompile(`"seconds": [0-9.e-]+`)
	assert.Equal(t, seconds.ReplaceAllString(slow, ""), seconds.ReplaceAllString(fast, ""), "the same summary either way")

	// A grown file is read, through the store.
	f, err := os.OpenFile(filepath.Join(dir, "b.json"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, errOut, code = tine(t, db, "import", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "; 1 unchanged, 1 rewritten, read again")
	assert.Equal(t, opened+2, storeImports.Load())

	// Another process wrote the store: its copy is not trusted.
	_, errOut, code = tine(t, db, "import", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, opened+2, storeImports.Load(), "unchanged again")
	st, err := store.Open(db)
	require.NoError(t, err)
	runs, err := st.RunsBySource(t.Context(), filepath.Join(dir, "a.json"))
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	require.NoError(t, st.SetHidden(t.Context(), runs[0].ID, true))
	require.NoError(t, st.Close())
	_, errOut, code = tine(t, db, "import", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, opened+3, storeImports.Load(), "the store changed since the copy")
}

// TestImportSaysAFileHeldOnlyTokenCounts: a rollout that counted tokens
// and holds no message is not passed over in silence: the summary names
// it with what it counted, and says there was nothing to show.
func TestImportSaysAFileHeldOnlyTokenCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout-2026-05-02T10-00-00-0000eeee-0000-7000-8000-000000000002.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"timestamp":"2026-05-02T10:00:00.000Z","type":"session_meta","payload":{"id":"0000eeee-0000-7000-8000-000000000002","cwd":"/p"}}
{"timestamp":"2026-05-02T10:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":40,"total_tokens":1240},"last_token_usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":40,"total_tokens":1240}}}}
`), 0o644))
	out, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "import", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "1 file held no messages, only token counts: nothing to show, the tokens not counted in any run:\n")
	assert.Contains(t, out, "  "+path+": 1000 input, 200 cached, 40 output tokens\n")
}

// TestImportCountsInTheSingular: one of a thing is said as one ("1 run",
// "1 unreadable line"), not "1 runs".
func TestImportCountsInTheSingular(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "one.jsonl"), []byte(`{"role": "user", "content": "Name a prime."}
this line is not json
{"role": "assistant", "content": "7"}
`), 0o644))
	out, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "import", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "imported 1 run, 2 messages from 1 file (")
	assert.Contains(t, out, "skipped 1 unreadable line:\n")
}

// lockedBuffer is a bytes.Buffer written by one goroutine, read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestImportWatch: `tine import --watch` makes the import, then imports a
// session that appears later (into a store the first import left empty)
// and one that grows, a JSON line each, until it is interrupted, which
// ends it with status 0.
func TestImportWatch(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "t.db")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--db", db, "import", dir, "--watch", "--json"}, &env{stdout: &out, stderr: &errOut, stdin: strings.NewReader("")})
	}()
	lines := func() []importer.Summary {
		var sums []importer.Summary
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var s importer.Summary
			if l != "" && json.Unmarshal([]byte(l), &s) == nil {
				sums = append(sums, s)
			}
		}
		return sums
	}
	waitFor := func(what string, ok func([]importer.Summary) bool) []importer.Summary {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if s := lines(); ok(s) {
				return s
			}
			select {
			case code := <-done:
				t.Fatalf("ended (%d) before %s: %s %s", code, what, out.String(), errOut.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Fatalf("no %s within 30 s: %s %s", what, out.String(), errOut.String())
		return nil
	}
	first := waitFor("first summary", func(s []importer.Summary) bool { return len(s) >= 1 })
	assert.Zero(t, first[0].Runs, "the folder was empty")

	seed, err := os.ReadFile("testdata/openai/chat.jsonl")
	require.NoError(t, err)
	lines2 := bytes.SplitAfter(seed, []byte("\n"))
	p := filepath.Join(dir, "chat.jsonl")
	require.NoError(t, os.WriteFile(p, bytes.Join(lines2[:len(lines2)/2], nil), 0o600))
	got := waitFor("the new session", func(s []importer.Summary) bool { return len(s) >= 2 && s[len(s)-1].Runs == 1 })
	assert.Positive(t, got[len(got)-1].Messages)

	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(bytes.Join(lines2[len(lines2)/2:], nil))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	waitFor("the grown session", func(s []importer.Summary) bool { return len(s) >= 3 })

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not end when interrupted")
	}
	assert.Contains(t, errOut.String(), "watching for new and grown sessions")
	ls, _, code := tine(t, db, "ls", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, ls, `"harness": "openai"`)
}
