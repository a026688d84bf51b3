package tui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness/importer"
	"tine/store"
)

// Watch mode: while the TUI is open on the user's own database
// (Options.Watch), the agents' default folders are imported every few
// seconds, incrementally (an unchanged file costs one stat), so a session
// Claude Code, Codex or pi is writing now grows in the library and in its
// open tree. The screens follow the store as always (live.go); watch mode
// only writes to it. It waits until something was imported once: on an
// empty database the library offers the first import instead.
const watchEvery = 2 * time.Second

type (
	watchTickMsg struct{}
	watchDoneMsg struct {
		sum importer.Summary
		// fresh counts files read for the first time.
		fresh int
		err   error
	}
)

// watchTick schedules the next watch import.
func (a *App) watchTick() tea.Cmd {
	if !a.opts.Watch || a.st == nil {
		return nil
	}
	return a.tick(a.watchEvery, func(time.Time) tea.Msg { return watchTickMsg{} })
}

// watchImport runs one incremental import in a goroutine of its own,
// never two at once nor beside the library's import (i); quitting cancels
// it through the program's context.
func (a *App) watchImport() tea.Cmd {
	if !a.opts.Watch || a.st == nil || a.watching {
		return nil
	}
	if a.imp.running {
		return a.watchTick()
	}
	a.watching = true
	ctx, st, formats := a.ctx, a.st, a.formats
	done := make(chan watchDoneMsg, 1)
	a.wg.Add(1)
	a.goSafe("watch", func() {
		defer a.wg.Done()
		done <- watchOnce(ctx, st, formats)
	})
	return func() tea.Msg {
		select {
		case m := <-done:
			return m
		case <-ctx.Done():
			return nil
		}
	}
}

func watchOnce(ctx context.Context, st *store.Store, formats importer.Formats) watchDoneMsg {
	known, err := st.Sources(ctx)
	if err != nil || len(known) == 0 {
		return watchDoneMsg{err: err}
	}
	files, err := importer.Discover(formats)
	if err != nil {
		return watchDoneMsg{err: err}
	}
	fresh := 0
	for _, f := range files {
		if _, ok := known[f.Path]; !ok && f.Skip == "" && f.Err == nil {
			fresh++
		}
	}
	sum, err := importer.Import(ctx, st, files, importer.Options{Formats: formats})
	return watchDoneMsg{sum: sum, fresh: fresh, err: err}
}

// watchDone says what a watch import brought, if anything, and shows it
// at once; a failure is logged and shown once, not every two seconds.
func (a *App) watchDone(msg watchDoneMsg) tea.Cmd {
	a.watching = false
	cmds := []tea.Cmd{a.watchTick()}
	if a.imp.queued {
		a.imp.queued = false
		cmds = append(cmds, a.startImport())
	}
	if msg.err != nil {
		if errors.Is(msg.err, context.Canceled) {
			return nil
		}
		if text := errorText(msg.err); text != a.watchErr {
			a.watchErr = text
			slog.Warn("watch: import", "err", msg.err)
			cmds = append(cmds, a.setStatus("watching the agents' sessions: "+text, levelWarn))
		}
		return tea.Batch(cmds...)
	}
	a.watchErr = ""
	if errs := strings.Join(msg.sum.Errors, "\n"); errs != a.watchFileErrs {
		a.watchFileErrs = errs
		if errs != "" {
			slog.Warn("watch: files not imported", "errors", errs)
		}
	}
	news := watchNews(msg.sum, msg.fresh)
	if news == "" {
		return tea.Batch(cmds...)
	}
	cmds = append(cmds, a.reloadTree())
	if a.screen == screenLibrary && a.lib.mode != libHits {
		cmds = append(cmds, a.loadTrees())
	}
	if a.status == "" || a.statusLevel == levelInfo {
		cmds = append(cmds, a.setStatus(news, levelInfo))
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
