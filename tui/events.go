package tui

import (
	"sync"

	"tine/harness/fork"
	"tine/model"
)

// runMailbox collects a batch's events for the screen without ever making
// the driver wait: events are merged per run (the streamed text's tail,
// whether something was stored, the latest status) and the screen takes
// all that piled up at once (as fzf's eventbox does).
type runMailbox struct {
	mu      sync.Mutex
	pending map[string]*runNews
	order   []string // runs with news, in the order they first had some
	done    bool
	ready   chan struct{} // holds one token while there is news
}

// runNews is what happened to one run since the screen last looked.
type runNews struct {
	runID string
	// tail is the end of the text streamed since; stored says a message
	// or a status was written (the tree must be read again).
	tail   string
	stored bool
	status model.Status // the latest status change, "" for none
	err    error        // the error of a failure
	note   string       // the latest note (a retry), "" for none
}

func newRunMailbox() *runMailbox {
	return &runMailbox{pending: map[string]*runNews{}, ready: make(chan struct{}, 1)}
}

// put merges ev into the run's news; it never blocks.
func (m *runMailbox) put(ev fork.RunEvent) {
	m.mu.Lock()
	n := m.pending[ev.RunID]
	if n == nil {
		n = &runNews{runID: ev.RunID}
		m.pending[ev.RunID] = n
		m.order = append(m.order, ev.RunID)
	}
	if ev.Delta != "" {
		n.tail = lastRunes(n.tail+ev.Delta, 200)
	}
	if ev.Message != nil || ev.Status != "" {
		// What was streamed is now stored; what comes after it is new.
		n.stored, n.tail = true, ""
	}
	if ev.Status != "" {
		n.status, n.err = ev.Status, ev.Err
	}
	if ev.Note != "" {
		n.note = ev.Note
	}
	m.mu.Unlock()
	m.wake()
}

// close says no more events will come.
func (m *runMailbox) close() {
	m.mu.Lock()
	m.done = true
	m.mu.Unlock()
	m.wake()
}

func (m *runMailbox) wake() {
	select {
	case m.ready <- struct{}{}:
	default: // a wake-up is already waiting
	}
}

// take waits for news and returns all of it; done is true once the batch
// has ended and nothing is left.
func (m *runMailbox) take() (news []runNews, done bool) {
	for {
		<-m.ready
		m.mu.Lock()
		for _, id := range m.order {
			news = append(news, *m.pending[id])
		}
		clear(m.pending)
		m.order = m.order[:0]
		done = m.done
		m.mu.Unlock()
		if done {
			m.wake() // the next take must not wait for a wake-up that never comes
		}
		if len(news) > 0 || done {
			return news, done && len(news) == 0
		}
	}
}
