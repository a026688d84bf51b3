package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness/importer"
)

// Watch mode: while the TUI is open on the user's own database
// (Options.Watch), what changes in the agents' default folders is
// imported, incrementally, by an importer.Watcher: every folder is walked
// every 2 seconds, less often while nothing changes (up to every 30), and
// the files changed in the last minutes are looked at every 2 seconds,
// so a session an agent is writing now grows in the library and in its
// open tree. The screens follow the store as always (live.go); watch mode
// only writes to it. It waits until something was imported once: on an
// empty database the library offers the first import instead.

// watchState is watch mode's: whether it is on, whether an import runs
// now, its watcher and when it looks next, and what it last failed with
// (err for the import, fileErrs for the files it could not read), each
// said once.
type watchState struct {
	on, running bool
	opts        importer.WatchOptions
	watcher     *importer.Watcher
	// after is how long until the watcher's next look.
	after         time.Duration
	err, fileErrs string
	// formats are what a watch import reads (App.formats).
	formats importer.Formats
}

type (
	watchTickMsg struct{}
	watchDoneMsg struct {
		res importer.WatchResult
		err error
	}
)

// watchReport is what a watch message asks of the rest of the program:
// done says an import ended (so the library's, if queued, may start);
// news is what arrived ("" for nothing), warn a failure to say.
type watchReport struct {
	done       bool
	news, warn string
}

// update handles watch mode's messages: a tick starts an import unless
// one runs (or the library's runs: importing), a done import schedules
// the next one and says what it brought.
func (w watchState) update(msg tea.Msg, e env, importing bool) (watchState, tea.Cmd, watchReport) {
	switch msg := msg.(type) {
	case watchTickMsg:
		var cmd tea.Cmd
		w, cmd = w.start(e, importing)
		return w, cmd, watchReport{}
	case watchDoneMsg:
		return w.done(msg, e)
	}
	return w, nil, watchReport{}
}

// next schedules the next watch import.
func (w watchState) next(e env) tea.Cmd {
	if !w.on {
		return nil
	}
	after := w.after
	if after <= 0 {
		after = cmp.Or(w.opts.Every, importer.DefaultWatch.Every)
	}
	return e.tick(after, func(time.Time) tea.Msg { return watchTickMsg{} })
}

// start runs one incremental import in a goroutine of its own, never two
// at once nor beside the library's import (i); quitting cancels it
// through the program's context.
func (w watchState) start(e env, importing bool) (watchState, tea.Cmd) {
	if !w.on || w.running {
		return w, nil
	}
	if importing {
		return w, w.next(e)
	}
	w.running = true
	if w.watcher == nil {
		formats := w.formats
		w.watcher = importer.NewWatcher(e.st, formats, func() ([]importer.Found, error) { return importer.Discover(formats) }, w.opts)
	}
	ctx, watcher := e.ctx, w.watcher
	done := make(chan watchDoneMsg, 1)
	e.spawn("watch", func() {
		res, err := watcher.Poll(ctx)
		done <- watchDoneMsg{res: res, err: err}
	})
	return w, func() tea.Msg {
		select {
		case m := <-done:
			return m
		case <-ctx.Done():
			return nil
		}
	}
}

// done takes a watch import's end: the next one is scheduled; a failure
// is logged and said once, not every two seconds.
func (w watchState) done(msg watchDoneMsg, e env) (watchState, tea.Cmd, watchReport) {
	w.running = false
	w.after = msg.res.Next
	if errors.Is(msg.err, context.Canceled) {
		return w, nil, watchReport{} // quitting
	}
	r := watchReport{done: true}
	if msg.err != nil {
		if text := errorText(msg.err); text != w.err {
			w.err = text
			slog.Warn("watch: import", "err", msg.err)
			r.warn = "watching the agents' sessions: " + text
		}
		return w, w.next(e), r
	}
	w.err = ""
	// The files that cannot be read are listed by a walk, not by a look
	// at the hot files only.
	if errs := strings.Join(msg.res.Sum.Errors, "\n"); msg.res.Walked && errs != w.fileErrs {
		w.fileErrs = errs
		if errs != "" {
			slog.Warn("watch: files not imported", "errors", errs)
		}
	}
	r.news = watchNews(msg.res.Sum, msg.res.Fresh)
	return w, w.next(e), r
}

// watched does what a watch report asks: the library's import queued
// behind the watch's starts, a failure is said, and news reads the
// screens again and is said unless something louder is showing.
func (a *App) watched(r watchReport) tea.Cmd {
	var cmds []tea.Cmd
	if r.done && a.imp.queued {
		a.imp.queued = false
		cmds = append(cmds, a.startImport())
	}
	if r.warn != "" {
		cmds = append(cmds, a.setStatus(r.warn, levelWarn))
	}
	if r.news != "" {
		cmds = append(cmds, a.reloadTree())
		if a.screen == screenLibrary && !a.lib.showsHits() {
			cmds = append(cmds, a.loadTrees())
		}
		if a.status.quiet() {
			cmds = append(cmds, a.setStatus(r.news, levelInfo))
		}
	}
	return tea.Batch(cmds...)
}

// watchNews says briefly what arrived: "1 new session", "4 new messages
// in 1 session"; "" when nothing did.
func watchNews(sum importer.Summary, fresh int) string {
	if sum.Runs == 0 && sum.Appended == 0 {
		return ""
	}
	var parts []string
	if fresh > 0 {
		parts = append(parts, plural(fresh, "new session"))
	}
	switch grown := sum.Appended + sum.Reread; {
	case grown == 0:
	case sum.Reread == 0 && fresh == 0:
		parts = append(parts, fmt.Sprintf("%s in %s", plural(sum.Messages, "new message"), plural(grown, "session")))
	default:
		parts = append(parts, plural(grown, "session")+" grew")
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ")
}
