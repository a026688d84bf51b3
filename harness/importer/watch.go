package importer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"tine/model"
)

// WatchOptions say how often a Watcher looks. Zero fields take the
// defaults (DefaultWatch).
type WatchOptions struct {
	// Every is the first interval between two walks of every folder; each
	// walk that finds nothing changed doubles it, up to MaxEvery, and any
	// change brings it back to Every.
	Every, MaxEvery time.Duration
	// HotEvery is how often the hot files are looked at, whatever the
	// walk's interval: the HotFiles files changed most lately, within
	// HotFor, so a session an agent is writing shows within HotEvery.
	HotEvery, HotFor time.Duration
	HotFiles         int
	// Empty: import into a store that holds no file yet, as `tine import
	// --watch` does (it made the first import itself, which may have found
	// nothing); the TUI's watch leaves the first import to the library.
	Empty bool
}

// DefaultWatch is what a Watcher uses for the options left zero.
var DefaultWatch = WatchOptions{Every: 2 * time.Second, MaxEvery: 30 * time.Second,
	HotEvery: 2 * time.Second, HotFor: 5 * time.Minute, HotFiles: 32}

// Watcher imports what changes in a set of folders, again and again, at
// a cost that falls when nothing does: an idle walk of every folder (a
// read of each folder, a stat of each file) backs off from Every to
// MaxEvery, while the few files that changed lately, and the folders
// that hold the files, are stat'd every HotEvery: a session being written
// or a new one shows within HotEvery. It imports only the files whose size or time differ from what
// the store holds, and never the first import: until the store holds a
// file it imports nothing (the TUI's library offers that one).
//
// A Watcher is used from one goroutine at a time.
type Watcher struct {
	st   Store
	opts WatchOptions
	// Formats and Options are what each import reads with (Options.Formats
	// is set from formats).
	formats  Formats
	discover func() ([]Found, error)
	stat     func(path string) (os.FileInfo, error)
	// Now is the clock (time.Now); tests set their own.
	Now func() time.Time

	known map[string]model.Source // the store's sizes and times, nil until read
	seen  map[string]Found        // what the last walk (and the hot looks since) saw
	order []string                // seen's paths, in the walk's order
	hot   []string                // the files looked at every HotEvery
	// folders are the folders that hold the files and the folders above
	// them, with their times as the last walk found them: a file made or
	// removed in one changes its time, and brings the walk on at once.
	folders  map[string]time.Time
	every    time.Duration // the walk's interval now
	nextWalk time.Time
}

// WatchResult is what one Poll did.
type WatchResult struct {
	// Sum is the import's summary, Fresh how many of its files were new
	// to the store. Nothing imported: Sum counts the files seen unchanged.
	Sum   Summary
	Fresh int
	// Walked: every folder was read (else only the hot files were looked
	// at); Sum then lists every file that cannot be read.
	Walked bool
	// Next is how long until the next Poll is due.
	Next time.Duration
}

// NewWatcher watches the files discover lists (Discover's, for the
// agents' folders), importing with formats into st.
func NewWatcher(st Store, formats Formats, discover func() ([]Found, error), opts WatchOptions) *Watcher {
	def := DefaultWatch
	opts.Every = cmp0(opts.Every, def.Every)
	opts.MaxEvery = max(cmp0(opts.MaxEvery, def.MaxEvery), opts.Every)
	opts.HotEvery = cmp0(opts.HotEvery, def.HotEvery)
	opts.HotFor = cmp0(opts.HotFor, def.HotFor)
	if opts.HotFiles == 0 {
		opts.HotFiles = def.HotFiles
	}
	return &Watcher{st: st, opts: opts, formats: formats, discover: discover, stat: os.Stat,
		Now: time.Now, every: opts.Every}
}

func cmp0(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Interval is the walk's interval now (it grows while nothing changes).
func (w *Watcher) Interval() time.Duration { return w.every }

// Hot lists the files looked at every HotEvery.
func (w *Watcher) Hot() []string { return slices.Clone(w.hot) }

// Poll does what is due now: a walk of every folder once its interval has
// passed, else a look at the hot files, and imports what changed.
func (w *Watcher) Poll(ctx context.Context) (WatchResult, error) {
	now := w.Now()
	if w.known == nil {
		known, err := w.st.Sources(ctx)
		if err != nil {
			return WatchResult{Next: w.opts.Every}, err
		}
		if len(known) == 0 && !w.opts.Empty {
			// Nothing imported yet: watch mode never makes the first import.
			return WatchResult{Next: w.opts.Every}, nil
		}
		if known == nil {
			known = map[string]model.Source{}
		}
		w.known = known
	}
	var res WatchResult
	var err error
	if w.seen == nil || !now.Before(w.nextWalk) {
		res, err = w.walk(ctx, now)
	} else {
		res, err = w.look(ctx, now)
	}
	res.Next = w.nextWalk.Sub(now)
	if len(w.hot) > 0 || len(w.folders) > 0 {
		res.Next = min(res.Next, w.opts.HotEvery)
	}
	res.Next = max(res.Next, time.Millisecond)
	return res, err
}

// walk reads every folder; the interval doubles when nothing changed
// since the last walk, and goes back to Every when something did.
func (w *Watcher) walk(ctx context.Context, now time.Time) (WatchResult, error) {
	res := WatchResult{Walked: true}
	files, err := w.discover()
	if err != nil {
		w.nextWalk = now.Add(w.every)
		return res, err
	}
	first := w.seen == nil
	changed := !first && len(files) != len(w.seen)
	seen := make(map[string]Found, len(files))
	order := make([]string, 0, len(files))
	for _, f := range files {
		if prev, ok := w.seen[f.Path]; !first && (!ok || !sameFile(prev, f)) {
			changed = true
		}
		seen[f.Path] = f
		order = append(order, f.Path)
	}
	w.seen, w.order = seen, order
	if changed || first {
		w.every = w.opts.Every
	} else if w.every < w.opts.MaxEvery {
		w.every = min(2*w.every, w.opts.MaxEvery)
	}
	w.nextWalk = now.Add(w.every)
	w.hot = w.hotFiles(now)
	w.folders = map[string]time.Time{}
	for _, f := range files {
		if f.Skip != "" || f.Err != nil {
			continue
		}
		for d, i := filepath.Dir(f.Path), 0; i < 2; d, i = filepath.Dir(d), i+1 {
			if _, ok := w.folders[d]; ok {
				continue
			}
			if info, err := w.stat(d); err == nil {
				w.folders[d] = info.ModTime()
			}
		}
	}
	res.Sum, res.Fresh, err = w.importChanged(ctx, files)
	return res, err
}

// look stats the folders and the hot files: a folder whose time changed
// (a file made or removed in it) is walked at once; a hot file that
// changed is imported, and brings the walk's interval back to Every (what
// changes may change beside it); one gone brings the walk on at once.
func (w *Watcher) look(ctx context.Context, now time.Time) (WatchResult, error) {
	for d, mtime := range w.folders {
		if info, err := w.stat(d); err != nil || !info.ModTime().Equal(mtime) {
			return w.walk(ctx, now) // a file made or removed there
		}
	}
	var files []Found
	for _, p := range w.hot {
		prev := w.seen[p]
		info, err := w.stat(p)
		if err != nil || !info.Mode().IsRegular() {
			// Gone or replaced by something else: the walk says what it is.
			w.every, w.nextWalk = w.opts.Every, now
			continue
		}
		f := Found{Path: p, Format: prev.Format, Size: info.Size(), MTime: info.ModTime()}
		if !sameFile(prev, f) {
			w.seen[p] = f
			files = append(files, f)
		}
	}
	if len(files) > 0 && w.every != w.opts.Every {
		w.every = w.opts.Every
		w.nextWalk = min2(w.nextWalk, now.Add(w.every))
	}
	sum, fresh, err := w.importChanged(ctx, files)
	return WatchResult{Sum: sum, Fresh: fresh}, err
}

func min2(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func sameFile(a, b Found) bool {
	return a.source().Size == b.source().Size && a.MTime.Equal(b.MTime) && a.Skip == b.Skip && (a.Err == nil) == (b.Err == nil)
}

// hotFiles are the HotFiles files of the last walk changed most lately,
// within HotFor of now.
func (w *Watcher) hotFiles(now time.Time) []string {
	var hot []Found
	for _, p := range w.order {
		f := w.seen[p]
		if f.Skip == "" && f.Err == nil && now.Sub(f.MTime) <= w.opts.HotFor {
			hot = append(hot, f)
		}
	}
	slices.SortStableFunc(hot, func(a, b Found) int { return b.MTime.Compare(a.MTime) })
	hot = hot[:min(len(hot), w.opts.HotFiles)]
	paths := make([]string, len(hot))
	for i, f := range hot {
		paths[i] = f.Path
	}
	return paths
}

// importChanged imports the files whose size or time differ from the
// store's; the others are counted unchanged, and what cannot be read is
// listed, as Import would.
func (w *Watcher) importChanged(ctx context.Context, files []Found) (Summary, int, error) {
	var todo []Found
	fresh := 0
	sum := newSummary()
	for _, f := range files {
		if f.Skip != "" || f.Err != nil {
			listUnread(f, &sum)
			continue
		}
		prev, ok := w.known[f.Path]
		if unchanged(prev, f.source()) {
			sum.Files++
			sum.Unchanged++
			continue
		}
		if !ok {
			fresh++
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		return sum, 0, nil
	}
	got, err := Import(ctx, w.st, todo, Options{Formats: w.formats})
	got.Files += sum.Files
	got.Unchanged += sum.Unchanged
	got.Failed += sum.Failed
	got.SkippedFiles = append(got.SkippedFiles, sum.SkippedFiles...)
	got.Errors = append(got.Errors, sum.Errors...)
	if err != nil || got.Failed > sum.Failed {
		// Which file failed the summary says only in words: read again
		// what the store holds.
		w.known = nil
		if known, kerr := w.st.Sources(ctx); kerr == nil && known != nil {
			w.known = known
		}
		return got, fresh, err
	}
	for _, f := range todo {
		w.known[f.Path] = f.source()
	}
	return got, fresh, nil
}
