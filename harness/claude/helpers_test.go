package claude

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// mainLine parses a transcript and returns its main run's messages.
func mainLine(t testing.TB, path string) []model.Message {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, pf.Runs)
	return pf.Runs[0].Messages
}

// got is what a turn emitted.
type got struct {
	events  []harness.Event
	msgs    []model.Message
	session string
	deltas  string
	cost    float64
	notes   []string
}

func collect(g *got) func(harness.Event) {
	var mu sync.Mutex
	return func(e harness.Event) {
		mu.Lock()
		defer mu.Unlock()
		g.events = append(g.events, e)
		switch e.Kind {
		case harness.EventMessage:
			g.msgs = append(g.msgs, e.Message)
		case harness.EventSession:
			g.session = e.NativeID
		case harness.EventDelta:
			g.deltas += e.Delta
		case harness.EventCost:
			g.cost += e.CostUSD
		case harness.EventNote:
			g.notes = append(g.notes, e.Note)
		}
	}
}
