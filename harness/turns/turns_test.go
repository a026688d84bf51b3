package turns

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/fork"
	"tine/model"
)

// TestEventPipeNeverBlocksTheWork: a reader that does not read (a TUI
// suspended, or gone) never makes the work wait: events queue, deltas
// merged; the end is said once.
func TestEventPipeNeverBlocksTheWork(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	fd, err := syscall.Dup(int(w.Fd()))
	require.NoError(t, err)
	w.Close()
	p := &EventPipe{}
	p.Open(fd)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100000 { // far more than a pipe holds
			p.Put(fork.RunEvent{RunID: "r", Delta: fmt.Sprintf("piece %d ", i)})
		}
		p.Put(fork.RunEvent{RunID: "r", Status: model.Completed})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("put blocked on a pipe nobody reads")
	}
	go p.End(nil)
	var evs []fork.RunEvent
	ended, endErr := ReadEvents(r, func(ev fork.RunEvent) { evs = append(evs, ev) })
	assert.True(t, ended)
	assert.NoError(t, endErr)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	assert.Equal(t, model.Completed, last.Status)
	tail := evs[len(evs)-2].Delta
	assert.True(t, strings.HasSuffix(tail, "piece 99999 "), "the streamed text's tail is kept: %q", LastBytes(tail, 40))
	assert.LessOrEqual(t, len(tail), MaxDelta)
}
