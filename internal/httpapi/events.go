package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// Hub follows the store and tells its subscribers what the TUI shows
// live: each run whose status, length, spending or error changed (a run
// made, a turn started, ended or failed), and each new message of a run
// they follow, whichever process wrote it (a turn of this server's, a
// background tine's, an import). It asks the store cheaply whether
// anything was committed (store.Changes) every Every, and only then reads
// the runs changed since it last read (Store.RunsChangedSince), not every
// run.
type Hub struct {
	st    *store.Store
	every time.Duration

	// reading is held while the runs are read and compared.
	reading sync.Mutex
	// runs are the runs as last read: nil while no one follows (the hub
	// then reads nothing), read again when the first subscriber comes.
	runs map[string]runState
	// mark is the store's change number of the runs as last read.
	mark int64

	mu   sync.Mutex
	subs map[*subscriber]bool
	seq  int64
}

// runState is what a run event reports, to tell a change.
type runState struct {
	status    model.Status
	len       int
	cost      float64
	tokens    int64
	err, name string
}

// RunEvent is the data of a "run" event: a run as it is now.
type RunEvent struct {
	Run      string      `json:"run"`
	Tree     string      `json:"tree"`
	Parent   string      `json:"parent"`
	Name     string      `json:"name"`
	Harness  string      `json:"harness"`
	Status   string      `json:"status"`
	Messages int         `json:"messages"`
	Usage    model.Usage `json:"usage"`
	CostUSD  service.USD `json:"cost_usd"`
	Error    string      `json:"error,omitempty"`
	// New: the run was made since the last event.
	New bool `json:"new,omitempty"`
}

// MessageEvent is the data of a "message" event: a new message of a run.
type MessageEvent struct {
	Run     string          `json:"run"`
	Tree    string          `json:"tree"`
	Message service.Message `json:"message"`
}

// maxEventText bounds a part's text in a message event: the whole
// message is GET /api/runs/{id}.
const maxEventText = 16 << 10

// maxNewMessages bounds the messages one run's event carries at once: a
// run that grew by more (an import) says so in its run event.
const maxNewMessages = 64

// event is one server-sent event.
type event struct {
	id   int64
	kind string
	run  string
	tree string
	data []byte
}

// subscriber is one client of GET /api/events.
type subscriber struct {
	ch     chan event
	runs   map[string]bool // none: every run
	trees  map[string]bool
	lagged bool
}

func (s *subscriber) wants(run, tree string) bool {
	if len(s.runs) == 0 && len(s.trees) == 0 {
		return true
	}
	return s.runs[run] || s.trees[tree]
}

// NewHub makes a hub over st that looks for changes every every.
func NewHub(st *store.Store, every time.Duration) *Hub {
	return &Hub{st: st, every: every, subs: map[*subscriber]bool{}}
}

// Run follows the store until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	ch, err := h.st.WatchChanges(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			h.closeAll()
			return nil
		case <-tick.C:
		}
		changed, err := ch.Changed(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			slog.Warn("events: watching the store", "err", err)
			continue
		}
		if changed {
			h.read(ctx)
		}
	}
}

// read reads the runs changed since they were last read and publishes
// what changed; with no subscriber it reads nothing, and forgets them.
func (h *Hub) read(ctx context.Context) {
	h.reading.Lock()
	defer h.reading.Unlock()
	h.mu.Lock()
	none := len(h.subs) == 0
	h.mu.Unlock()
	if none {
		h.runs, h.mark = nil, 0
		return
	}
	first := h.runs == nil
	if first {
		h.mark = 0 // every run
	}
	runs, mark, err := h.st.RunsChangedSince(ctx, h.mark)
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("events: reading runs", "err", err)
		}
		return
	}
	h.mark = mark
	if first {
		h.runs = make(map[string]runState, len(runs))
	}
	for _, r := range runs {
		now := runState{status: r.Status, len: r.Len(), cost: r.CostUSD, tokens: r.Usage.Total(), err: r.Error, name: r.Name}
		was, seen := h.runs[r.ID]
		h.runs[r.ID] = now
		if first || (seen && was == now) {
			continue // the runs as they were when the first subscriber came, or no change it reports
		}
		from := r.ForkAt
		if seen {
			from = max(was.len, r.ForkAt)
		}
		h.publish("run", r.ID, r.TreeID, RunEvent{Run: r.ID, Tree: r.TreeID, Parent: r.ParentID, Name: r.Name, Harness: r.Harness,
			Status: string(r.Status), Messages: r.Len(), Usage: r.Usage, CostUSD: service.USD(r.CostUSD), Error: r.Error, New: !seen})
		if now.len > from && h.following(r.ID, r.TreeID) {
			h.messages(ctx, r, from, now.len)
		}
	}
}

// following says a subscriber follows run's messages.
func (h *Hub) following(run, tree string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.wants(run, tree) {
			return true
		}
	}
	return false
}

// messages publishes run r's messages from..to (its own: a fork's
// prefix is its parent's), the last maxNewMessages of them.
func (h *Hub) messages(ctx context.Context, r model.Run, from, to int) {
	from = max(from, to-maxNewMessages)
	msgs, err := h.st.OwnMessagesRange(ctx, r.ID, from, to)
	if err != nil {
		return
	}
	for i, m := range msgs {
		j := service.ToMessage(from+i+1, m, false)
		for p := range j.Parts {
			j.Parts[p].Text = cut(j.Parts[p].Text)
			j.Parts[p].ToolInput = cut(j.Parts[p].ToolInput)
			j.Parts[p].Raw = cut(j.Parts[p].Raw)
		}
		h.publish("message", r.ID, r.TreeID, MessageEvent{Run: r.ID, Tree: r.TreeID, Message: j})
	}
}

// cut bounds a text an event carries, saying so.
func cut(s string) string {
	if len(s) <= maxEventText {
		return s
	}
	return strings.ToValidUTF8(s[:maxEventText], "") + fmt.Sprintf(" [… %d bytes more: GET /api/runs/{id}]", len(s)-maxEventText)
}

// publish sends an event to every subscriber that wants it; one that
// cannot take it (it reads too slowly) is dropped, told so, and never
// makes the hub wait.
func (h *Hub) publish(kind, run, tree string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev := event{id: h.seq, kind: kind, run: run, tree: tree, data: data}
	for s := range h.subs {
		if !s.wants(run, tree) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.lagged = true
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// subscribe adds a subscriber; the first reads the runs as they are now,
// before it returns, so that what changes after is said.
func (h *Hub) subscribe(ctx context.Context, runs, trees map[string]bool) *subscriber {
	s := &subscriber{ch: make(chan event, 1024), runs: runs, trees: trees}
	h.mu.Lock()
	h.subs[s] = true
	h.mu.Unlock()
	h.reading.Lock()
	first := h.runs == nil
	h.reading.Unlock()
	if first {
		h.read(ctx)
	}
	return s
}

func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s] {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}

// keepAlive is how often a quiet event stream gets a comment, so that a
// proxy or a client does not take it for dead.
const keepAlive = 15 * time.Second

// events is GET /api/events: server-sent events, "run" and "message",
// of every run, or of the runs (run=REF, repeated) and trees (tree=REF)
// asked for.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	runs, trees := map[string]bool{}, map[string]bool{}
	for _, ref := range r.URL.Query()["run"] {
		shown, err := s.svc.Show(r.Context(), ref)
		if err != nil {
			fail(w, err)
			return
		}
		runs[shown.Run.ID] = true
	}
	for _, ref := range r.URL.Query()["tree"] {
		shown, err := s.svc.Show(r.Context(), ref)
		if err != nil {
			fail(w, err)
			return
		}
		trees[shown.Run.TreeID] = true
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream: no deadline
	sub := s.hub.subscribe(r.Context(), runs, trees)
	defer s.hub.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": tine events\n\n")
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case ev, ok := <-sub.ch:
			if !ok {
				if sub.lagged {
					fmt.Fprint(w, "event: lagged\ndata: {\"error\":{\"code\":\"lagged\",\"message\":\"this stream read too slowly and missed events: read the runs again and follow anew\"}}\n\n")
					_ = rc.Flush()
				}
				return
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.id, ev.kind, ev.data)
		}
		if rc.Flush() != nil {
			return
		}
	}
}
