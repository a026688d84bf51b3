package claude

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"tine/harness"
)

// parseSplit parses data as Parse does, decoding on workers from byte
// from on, in chunks of at most lines lines.
func parseSplit(t *testing.T, data []byte, name string, sp split) harness.ParsedFile {
	t.Helper()
	p := newParser(name, subagentInfo(name))
	p.split = sp
	require.NoError(t, p.read(bytes.NewReader(data)))
	p.file.Runs = p.build()
	return p.file
}

// TestParallelDecodeIsSequential checks that a file decoded on workers
// (readParallel) parses exactly as one read a line at a time, for every
// Claude transcript in the test data (rewinds, forks, compactions,
// subagents, sidechains) and for a long one with garbage, blank, CRLF,
// duplicate and unfinished lines, whatever the chunks' size.
func TestParallelDecodeIsSequential(t *testing.T) {
	t.Parallel()
	var files []string
	for _, root := range []string{"testdata", "../../testdata"} {
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
				if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte(`"parentUuid"`)) {
					files = append(files, path)
				}
			}
			return nil
		})
	}
	require.Greater(t, len(files), 20)
	long := synthTranscript(3 << 20)
	lines := bytes.SplitAfter(long, []byte("\n"))
	var damaged []byte
	for i, l := range lines {
		damaged = append(damaged, l...)
		switch i % 97 {
		case 5:
			damaged = append(damaged, "{\"type\":\"user\",\"uuid\":\"x\",broken\n"...)
		case 11:
			damaged = append(damaged, "\n   \n"...)
		case 17:
			damaged = append(damaged, l...) // written twice
		case 23:
			damaged = append(damaged, bytes.Replace(l, []byte("\n"), []byte("\r\n"), 1)...)
		}
	}
	damaged = append(damaged, `{"type":"user","uuid":"unfinished"`...)
	type input struct {
		name string
		data []byte
	}
	inputs := []input{{"11111111-2222-4333-8444-555555555555.jsonl", damaged}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		inputs = append(inputs, input{f, data})
	}
	one := split{from: 1 << 62, workers: 1}
	for _, in := range inputs {
		want := parseSplit(t, in.data, in.name, one)
		for _, sp := range []split{
			{from: 0, bytes: 1, lines: 1, workers: 2},
			{from: 0, bytes: 64, lines: 3, workers: 3},
			{from: 1000, bytes: 1 << 20, lines: 4096, workers: 2},
		} {
			got := parseSplit(t, in.data, in.name, sp)
			require.Equal(t, want, got, "%s split %+v", in.name, sp)
		}
	}
	if testing.Short() {
		return
	}
	// The long one did go parallel, and reads to its last full line.
	require.Equal(t, int64(len(damaged)-len(`{"type":"user","uuid":"unfinished"`)), parseSplit(t, damaged, "x.jsonl", split{from: 0, bytes: 64, lines: 3, workers: 2}).Offset)
}

// TestTimestampAsTimeParse: the fast path reads Claude's timestamps
// exactly as time.Parse does, and leaves every other form to it.
func TestTimestampAsTimeParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"2026-12-01T06:51:45.137Z", "1999-01-28T23:59:59.999Z", "2026-02-28T00:00:00.000Z",
		"2026-02-29T00:00:00.000Z", "2026-12-31T06:51:45.137Z", "2026-13-01T06:51:45.137Z",
		"2026-12-01T24:00:00.000Z", "2026-12-01T06:51:45.13Z", "2026-12-01T06:51:45.137+02:00",
		"2026-12-01T06:51:45Z", "2026-12-01 06:51:45.137Z", "not a time", "2026-1x-01T06:51:45.137Z",
	} {
		want, _ := time.Parse(time.RFC3339Nano, s)
		require.Equal(t, want, timestamp([]byte(`"`+s+`"`)), s)
	}
	require.True(t, timestamp([]byte(`null`)).IsZero())
	require.True(t, timestamp(nil).IsZero())
}

// TestLeanParseIsTheSame: Parse, which lets the records and payloads go
// once the messages are built, gives what a parser that keeps them gives,
// for a session of many blocks of records (pageLen) with a rewind, a
// parent written after its child, and a title from a summary.
func TestLeanParseIsTheSame(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	const sess = "11111111-2222-4333-8444-555555555555"
	id := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	parent := "null"
	for i := range 3*pageLen + 100 {
		p := parent
		switch i {
		case 5000:
			p = `"` + id(4000) + `"` // a rewind
		case 7000:
			p = `"` + id(7001) + `"` // its parent comes next
		}
		role := "user"
		content := fmt.Sprintf(`"prompt %d"`, i)
		if i%2 == 1 {
			role = "assistant"
			content = fmt.Sprintf(`[{"type":"text","text":"answer %d"}]`, i)
		}
		fmt.Fprintf(&b, `{"parentUuid":%s,"type":%q,"message":{"role":%q,"id":"msg_%d","content":%s},"uuid":%q,"sessionId":%q,"timestamp":"2026-12-01T06:51:45.137Z"}`+"\n",
			p, role, role, i, content, id(i), sess)
		parent = `"` + id(i) + `"`
	}
	fmt.Fprintf(&b, `{"type":"summary","summary":"the long one","leafUuid":%q}`+"\n", id(3*pageLen+99))
	data := b.Bytes()
	lean, err := Parse(bytes.NewReader(data), sess+".jsonl")
	require.NoError(t, err)
	full := parseSplit(t, data, sess+".jsonl", split{from: 1 << 62, workers: 1})
	require.Equal(t, full, lean)
	require.Greater(t, len(lean.Runs), 1)
	require.Equal(t, "the long one", lean.Runs[0].Run.Title)
}
