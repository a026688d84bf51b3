package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/harness/importer"
	"tine/internal/service"
)

// importState is the library's view of importing this machine's sessions.
type importState struct {
	found   []importer.Found // what discovery turned up; nil until it looked
	looked  bool
	running bool
	// queued: i was pressed while a watch import ran; it starts after.
	queued   bool
	progress importer.Progress
	events   chan tea.Msg
	last     *importer.Summary
}

type (
	// foundMsg is what discovery found, and where it looked.
	foundMsg struct {
		files  []importer.Found
		looked []lookedIn
		err    error
	}
	importProgressMsg struct{ p importer.Progress }
	importDoneMsg     struct {
		sum importer.Summary
		err error
	}
)

// lookedIn is where discovery looked for one agent's sessions.
type lookedIn struct {
	agent string // as people know it
	dirs  []string
}

// discover looks for agent sessions off the UI goroutine, as an import
// would (service.Discover), saying where it looked (each format's
// folders, as this environment has them).
func discover(svc *service.Service, agents []harness.Agent) tea.Cmd {
	return func() tea.Msg {
		files, err := svc.Discover(nil)
		var looked []lookedIn
		for _, a := range agents {
			if a.Sessions != nil && a.Sessions.Dirs != nil {
				if dirs := a.Sessions.Dirs(); len(dirs) > 0 {
					looked = append(looked, lookedIn{agent: a.Display, dirs: dirs})
				}
			}
		}
		return foundMsg{files: files, looked: looked, err: err}
	}
}

// startImport imports every session found, reporting progress as it goes.
func (a *App) startImport() tea.Cmd {
	im := &a.imp
	if im.running {
		return a.setStatus("already importing", levelInfo)
	}
	if a.st == nil {
		return nil
	}
	if a.watch.running {
		im.queued = true // after the watch import that is running
		return a.setStatus("importing this machine's agent sessions…", levelInfo)
	}
	im.running = true
	im.events = make(chan tea.Msg, 16)
	svc, _ := a.act(nil)
	ctx, events := a.ctx, im.events
	a.goSafe("import", func() {
		defer close(events)
		sum, err := svc.Import(ctx, service.ImportRequest{Progress: func(p importer.Progress) {
			select {
			case events <- importProgressMsg{p: p}:
			default: // the screen is behind: drop a progress step, never block the import
			}
		}})
		select {
		case events <- importDoneMsg{sum: sum, err: err}:
		case <-ctx.Done(): // quitting: nobody reads any more
		}
	})
	return tea.Batch(a.nextImportEvent(), a.setStatus("importing this machine's agent sessions…", levelInfo))
}

func (a *App) nextImportEvent() tea.Cmd {
	events := a.imp.events
	return func() tea.Msg {
		msg, ok := <-events
		if !ok {
			return nil
		}
		return msg
	}
}

// foundSummary says what discovery found, by agent, in the order of
// agents. A session of an agent's database counts its share of the
// database's size (importer.Found), so the database is counted once.
func foundSummary(files []importer.Found, agents []harness.Agent) string {
	by := map[string]int{}
	var mb float64
	n := 0
	for _, f := range files {
		if f.Skip != "" || f.Err != nil {
			continue // not a session: Import lists it with its reason
		}
		n++
		by[f.Format]++
		mb += float64(max(f.Size, 0)) / 1e6
	}
	var parts []string
	for _, a := range agents {
		if by[a.Name] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a.Display, by[a.Name]))
		}
	}
	return fmt.Sprintf("%s (%.1f MB): %s", plural(n, "session"), mb, strings.Join(parts, ", "))
}

// progressLine draws an import's progress: a bar, files, MB, records/s.
// The bar is as wide whatever the numbers say (none done yet, more done
// than there was, or nothing to count bytes by).
func progressLine(p importer.Progress, width int, st *Styles) string {
	barW := max(min(width-50, 40), 10)
	frac := 1.0
	switch {
	case p.Bytes > 0:
		frac = float64(p.BytesDone) / float64(p.Bytes)
	case p.Files > 0:
		frac = float64(p.FilesDone) / float64(p.Files)
	}
	filled := 0
	if frac > 0 {
		filled = int(min(frac, 1) * float64(barW))
	}
	secs := max(time.Since(p.Started).Seconds(), 0.001)
	return st.Key.Render(strings.Repeat("█", filled)) + st.Subtle.Render(strings.Repeat("░", barW-filled)) +
		fmt.Sprintf(" %d/%d files · %.1f/%.1f MB · %.0f records/s", p.FilesDone, p.Files,
			float64(p.BytesDone)/1e6, float64(p.Bytes)/1e6, float64(p.Records)/secs)
}
