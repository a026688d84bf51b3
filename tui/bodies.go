package tui

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	tea "charm.land/bubbletea/v2"

	"tine/model"
)

// pageSize is how many of a run's own messages one read brings.
const pageSize = 64

// maxPages bounds the pages a tree keeps: those far from the screen go
// first when more are read.
const maxPages = 256

// bodies are the own messages of a run read so far, a page at a time. A
// command reads pages while Update puts them in, so they are locked.
type bodies struct {
	mu    sync.Mutex
	pages map[int][]model.Message
	used  map[int]uint64
	tick  uint64
}

// newBodies holds all of msgs.
func newBodies(all []model.Message) *bodies {
	b := &bodies{pages: map[int][]model.Message{}, used: map[int]uint64{}}
	for p := 0; p*pageSize < len(all); p++ {
		b.pages[p] = all[p*pageSize : min((p+1)*pageSize, len(all)) : min((p+1)*pageSize, len(all))]
	}
	return b
}

// get is own message i, nil while its page is not read.
func (b *bodies) get(i int) *model.Message {
	if b == nil || i < 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := i / pageSize
	page, ok := b.pages[p]
	if !ok || i%pageSize >= len(page) {
		return nil
	}
	b.tick++
	b.used[p] = b.tick
	return &page[i%pageSize]
}

// span is own messages from up to to, and whether they are all read.
func (b *bodies) span(from, to int) ([]model.Message, bool) {
	if b == nil {
		return nil, from >= to
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]model.Message, 0, max(to-from, 0))
	for i := from; i < to; {
		page, ok := b.pages[i/pageSize]
		if !ok || i%pageSize >= len(page) {
			return nil, false
		}
		take := min(len(page), to-(i/pageSize)*pageSize)
		out = append(out, page[i%pageSize:take]...)
		i = (i/pageSize)*pageSize + take
	}
	return out, true
}

func (b *bodies) has(p int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pages[p]
	return ok
}

func (b *bodies) put(p int, msgs []model.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pages[p] = msgs
	b.tick++
	b.used[p] = b.tick
}

// full is a copy holding the pages of the first n messages that are read
// whole: what a run read again keeps when it grew to past n.
func (b *bodies) full(n int) *bodies {
	c := &bodies{pages: map[int][]model.Message{}, used: map[int]uint64{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, page := range b.pages {
		if len(page) == pageSize && (p+1)*pageSize <= n {
			c.pages[p], c.used[p] = page, b.used[p]
		}
	}
	return c
}

// pageKey names a page of a run of a loaded tree.
type pageKey struct{ run, page int32 }

// bodiesLoadedMsg brings pages read for the tree of generation gen.
type bodiesLoadedMsg struct {
	gen   int
	asked []pageKey
	pages map[pageKey][]model.Message
	err   error
}

// loadBodies reads the pages of the rows on screen that are not read
// yet, and in a second command those a screen above and below it and the
// first and last screens (where g and G go), so that what shows comes
// first and a move mostly lands on rows read already. Every move calls it
// (syncDetail).
func (a *App) loadBodies() tea.Cmd {
	t := a.tree
	if t == nil || t.data.src == nil || len(t.rows) == 0 {
		return nil
	}
	if t.inflight == nil {
		t.inflight = map[pageKey]bool{}
	}
	h := max(t.height, 1)
	var shown, near []pageKey
	add := func(to *[]pageKey, i int) {
		r := t.rows[i]
		if r.kind != rowMessage {
			return
		}
		rd := t.data.runs[r.run]
		k := pageKey{r.run, int32((int(r.msg) - rd.first()) / pageSize)}
		if !t.inflight[k] && !rd.body.has(int(k.page)) {
			t.inflight[k] = true
			*to = append(*to, k)
		}
	}
	if t.cursor >= 0 && t.cursor < len(t.rows) {
		add(&shown, t.cursor)
	}
	for i := t.offset; i < min(t.offset+h, len(t.rows)); i++ {
		add(&shown, i)
	}
	for i := max(t.offset-h, 0); i < min(t.offset+2*h, len(t.rows)); i++ {
		add(&near, i)
	}
	for i := range min(h, len(t.rows)) {
		add(&near, i)
		add(&near, len(t.rows)-1-i)
	}
	return tea.Batch(a.readPages(shown), a.readPages(near))
}

// readPages reads pages of the open tree in a command.
func (a *App) readPages(want []pageKey) tea.Cmd {
	if len(want) == 0 {
		return nil
	}
	ctx, data, gen := a.ctx, a.tree.data, a.tree.gen
	return func() tea.Msg {
		msg := bodiesLoadedMsg{gen: gen, asked: want, pages: map[pageKey][]model.Message{}}
		for _, k := range want {
			rd := data.runs[k.run]
			from := rd.first() + int(k.page)*pageSize
			msgs, err := data.src.OwnMessagesRange(ctx, rd.run().ID, from, min(from+pageSize, rd.first()+rd.n))
			if err != nil {
				msg.err = err
				break
			}
			msg.pages[k] = msgs
		}
		return msg
	}
}

// bodiesLoaded puts pages read in and draws their rows again. Pages of a
// tree read again since are dropped: the new one asks for its own.
func (a *App) bodiesLoaded(msg bodiesLoadedMsg) tea.Cmd {
	t := a.tree
	if t == nil || msg.gen != t.gen {
		return nil
	}
	for _, k := range msg.asked {
		delete(t.inflight, k)
	}
	for k, msgs := range msg.pages {
		t.data.runs[k.run].body.put(int(k.page), msgs)
	}
	t.evictPages()
	t.invalidate()
	if msg.err != nil {
		return tea.Batch(a.setStatus(fmt.Sprintf("could not read the messages: %s", errorText(msg.err)), levelWarn), a.syncDetail())
	}
	return a.syncDetail()
}

// evictPages drops the pages used longest ago, beyond maxPages, that are
// not on screen or near it.
func (t *treeScreen) evictPages() {
	type page struct {
		rd   *runData
		p    int
		used uint64
	}
	var all []page
	for _, rd := range t.data.runs {
		rd.body.mu.Lock()
		for p := range rd.body.pages {
			all = append(all, page{rd, p, rd.body.used[p]})
		}
		rd.body.mu.Unlock()
	}
	if len(all) <= maxPages {
		return
	}
	near := map[pageKey]bool{}
	h := max(t.height, 1)
	keep := func(i int) {
		if r := t.rows[i]; r.kind == rowMessage {
			near[pageKey{r.run, int32((int(r.msg) - t.data.runs[r.run].first()) / pageSize)}] = true
		}
	}
	for i := max(t.offset-h, 0); i < min(t.offset+2*h, len(t.rows)); i++ {
		keep(i)
	}
	for i := range min(h, len(t.rows)) {
		keep(i)
		keep(len(t.rows) - 1 - i)
	}
	slices.SortFunc(all, func(x, y page) int { return cmp.Compare(x.used, y.used) })
	for _, pg := range all[:len(all)-maxPages] {
		if near[pageKey{int32(t.data.index[pg.rd.run().ID]), int32(pg.p)}] {
			continue
		}
		pg.rd.body.mu.Lock()
		delete(pg.rd.body.pages, pg.p)
		delete(pg.rd.body.used, pg.p)
		pg.rd.body.mu.Unlock()
	}
}
