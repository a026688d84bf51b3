package opencode

import (
	"tine/harness/opencode/export"

	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchDB writes a database of n sessions, each a copy of the fixture
// session (two turns, a shell command) under ids of its own, as opencode
// would keep n such sessions.
func benchDB(t testing.TB, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "session.json"))
	require.NoError(t, err)
	var exports [][]byte
	for i := range n {
		// Same-length ids: the fixture's with the last characters numbered.
		r := strings.NewReplacer("ses_dca70e0abffe47KOlCMZFuyNgm", fmt.Sprintf("ses_dca70e0abffe47KOlCMZF%05d", i),
			"NjVTN7cv1XeVMD", fmt.Sprintf("NjVTN7cv1%05d", i), "t6tnIj5Vc0LQ9n", fmt.Sprintf("t6tnIj5Vc%05d", i),
			"cAsGM1U2E1upBB", fmt.Sprintf("cAsGM1U2E%05d", i), "aecnCpRujKbOU0", fmt.Sprintf("aecnCpRuj%05d", i),
			"EYOTBcKdqtlb3Q", fmt.Sprintf("EYOTBcKdq%05d", i), `"prt_`, fmt.Sprintf(`"prt_%05d`, i))
		exports = append(exports, []byte(r.Replace(string(b))))
	}
	newDB(t, path, exports...)
}

// TestWriteBenchDB writes the 500-session database README's numbers were
// measured on to $TINE_OPENCODE_BENCH_DB (skipped without it).
func TestWriteBenchDB(t *testing.T) {
	path := os.Getenv("TINE_OPENCODE_BENCH_DB")
	if path == "" {
		t.Skip("TINE_OPENCODE_BENCH_DB names where to write a 500-session opencode database")
	}
	benchDB(t, path, 500)
}

// BenchmarkReadSessions reads every session of a 500-session database,
// as a first import does.
func BenchmarkReadSessions(b *testing.B) {
	path := filepath.Join(b.TempDir(), "opencode.db")
	benchDB(b, path, 500)
	ctx := context.Background()
	for b.Loop() {
		list, err := List(ctx, path)
		require.NoError(b, err)
		for _, e := range list {
			data, err := Read(ctx, path, e.ID)
			require.NoError(b, err)
			if _, err := export.Parse(bytes.NewReader(data), e.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
}
