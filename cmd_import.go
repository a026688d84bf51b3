package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/x/term"

	"tine/harness/importer"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

func cmdImport(ctx context.Context, e *env, args []string) error {
	fmts := formats()
	f := newFlags(e, "import", "[PATH...] [--format auto|"+strings.Join(fmts.Names(), "|")+"] [--watch] [--json]",
		"Import transcripts. With no PATH: every session of every agent on this machine\n"+
			"("+defaultFolders()+").\nWith PATHs: those files, and the .jsonl/.json files in those\n"+
			"folders. Unchanged files are skipped, grown ones read from where the last import\n"+
			"stopped. Unreadable lines are skipped and listed, never fatal; a partial last line\n"+
			"(the agent is still writing) is left for next time. Symlinks are followed; named\n"+
			"pipes, sockets and devices are skipped, saying so. The exit status is 1 when any\n"+
			"file or folder failed; a full disk or a damaged database stops the import at once.\n"+
			"With --watch it then goes on importing what the agents write (new sessions and\n"+
			"grown ones, within about two seconds) until interrupted, a line for each import.")
	format := f.String("format", "auto", "transcript `format`: auto, "+strings.Join(fmts.Names(), ", "))
	f.oneOf("format", append([]string{"auto"}, fmts.Names()...)...)
	asJSON := f.Bool("json", false, "print the summary as JSON")
	watch := f.Bool("watch", false, "then keep importing what changes, until interrupted (Ctrl+C)")
	paths, err := f.parse(args, 0, -1)
	if err != nil {
		return err
	}
	discover := func() ([]importer.Found, error) { return (&service.Service{Formats: fmts}).Discover(paths) }
	files, err := discover()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	start := time.Now()
	dbPath, err := e.dbPath()
	if err == nil {
		dbPath, err = filepath.Abs(dbPath)
	}
	if err != nil {
		return err
	}
	// Every file unchanged since the last import: said without opening the
	// store, from the copy of its sources table the last import left
	// (store.LoadScan says when that copy can be trusted).
	known, ok := store.LoadScan(dbPath)
	var sum importer.Summary
	if ok {
		sum, ok = importer.Unchanged(files, known)
		sum.Seconds = time.Since(start).Seconds()
	}
	if !ok {
		sum, err = importStore(ctx, e, dbPath, files, *format, *asJSON)
	}
	// A failing database stops the import; the summary still says what
	// was imported before, then the one line saying why it stopped.
	var stopped *importer.StoreError
	if err != nil && !errors.As(err, &stopped) {
		return err
	}
	switch {
	case *asJSON && *watch:
		if err := writeJSONLine(e.stdout, sum); err != nil { // the first of a stream
			return err
		}
	case *asJSON:
		if err := writeJSON(e.stdout, sum); err != nil {
			return err
		}
	case stopped != nil && sum.Files == 0:
		// Stopped before any file: "no files there" would be untrue.
	default:
		printSummary(e, sum, len(paths) == 0)
	}
	switch {
	case stopped != nil:
		return stopped
	case *watch:
		return watchImports(ctx, e, discover, *asJSON)
	case sum.Failed > 0 && sum.Runs == 0 && sum.Unchanged == 0 && sum.Appended == 0:
		return fmt.Errorf("nothing imported: %s", sum.Errors[0])
	case sum.Failed > 0:
		// Exit status 1: a script must not take a partial import for a
		// whole one.
		where := "listed above"
		if *asJSON {
			where = "the summary's errors"
		}
		return fmt.Errorf("import: %d failed (%s); the rest was imported", sum.Failed, where)
	}
	return nil
}

// watchImports goes on importing what discover lists as it changes (an
// importer.Watcher: every folder walked every 2 s, less often while
// nothing changes, the files written lately looked at every 2 s), until
// ctx ends (Ctrl+C, kill): a line for each import that brought something
// (a summary a line with --json). A file it cannot read is said once;
// a failing database stops it.
func watchImports(ctx context.Context, e *env, discover func() ([]importer.Found, error), asJSON bool) error {
	st, err := e.openToWrite()
	if err != nil {
		return err
	}
	defer st.Close()
	w := importer.NewWatcher(st, formats(), discover, importer.WatchOptions{Empty: true})
	fmt.Fprintln(e.stderr, "tine: watching for new and grown sessions; Ctrl+C stops")
	said := map[string]bool{}
	for {
		res, err := w.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var stopped *importer.StoreError
		if errors.As(err, &stopped) {
			return stopped
		}
		if err != nil && !said[err.Error()] {
			said[err.Error()] = true
			fmt.Fprintf(e.stderr, "tine: watching: %s\n", model.OneLine(err.Error(), 300))
		}
		for _, msg := range res.Sum.Errors {
			if !said[msg] {
				said[msg] = true
				fmt.Fprintf(e.stderr, "tine: %s\n", model.OneLine(msg, 0))
			}
		}
		if res.Sum.Runs > 0 || res.Sum.Appended > 0 || res.Sum.Reread > 0 || len(res.Sum.Skipped) > 0 {
			if asJSON {
				res.Sum.Errors = []string{} // said above
				if err := writeJSONLine(e.stdout, res.Sum); err != nil {
					return err
				}
			} else {
				fmt.Fprint(e.stdout, time.Now().Format("15:04:05")+" ")
				res.Sum.Errors = nil
				printSummary(e, res.Sum, false)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(res.Next):
		}
	}
}

// storeImports counts the imports that opened the store, for tests.
var storeImports atomic.Int64

// importMemoryLimit is the Go heap an import collects garbage to stay
// under (a soft limit: a live heap above it only makes collections more
// frequent). With it, importing one session of 200,000 messages (509 MB)
// peaked at 167 MB resident instead of 286 MB.
const importMemoryLimit = 150 << 20

// importStore runs the import into the store, and leaves the copy of its
// sources table that lets the next import of unchanged files skip opening
// it (store.SaveScan).
func importStore(ctx context.Context, e *env, dbPath string, files []importer.Found, format string, asJSON bool) (importer.Summary, error) {
	storeImports.Add(1)
	st, err := e.openToWrite()
	if err != nil {
		return importer.Summary{}, err
	}
	// An import's garbage is short-lived (parse buffers, row arguments):
	// collecting at five times the live heap rather than twice made a
	// first import of the 2000 x 30 corpus ~5% cheaper in CPU for ~25 MB
	// more (three times: ~5% before); turning collection off was slower
	// (fresh pages cost more than GC).
	debug.SetGCPercent(400)
	if os.Getenv("GOMEMLIMIT") == "" {
		// ...but not past importMemoryLimit: a long session's import (read
		// as a stream, its live heap under 110 MB) would otherwise let
		// garbage pile up to five times that between collections.
		debug.SetMemoryLimit(importMemoryLimit)
	}
	var progress func(importer.Progress)
	bar := newProgressBar(e.stderr)
	if bar != nil && !asJSON {
		progress = bar.update
	}
	sum, err := readService(st).ImportFound(ctx, files, format, progress)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		st.Close()
		return sum, err
	}
	// The copy must be of what the store holds once closed; a copy that
	// cannot be made only costs the next import its shortcut.
	sources, serr := st.Sources(ctx)
	if cerr := st.Close(); serr == nil && cerr == nil {
		_ = store.SaveScan(dbPath, sources)
	}
	return sum, nil
}

func printSummary(e *env, sum importer.Summary, discovered bool) {
	switch {
	case sum.Files > 0:
		printCounts(e, sum)
	case discovered:
		fmt.Fprintf(e.stdout, "No agent sessions found (looked in %s).\n", model.SafeText(defaultFolders()))
	case len(sum.SkippedFiles) == 0 && len(sum.Errors) == 0:
		fmt.Fprintln(e.stdout, "No .jsonl or .json files there.")
	}
	if len(sum.Skipped) > 0 {
		fmt.Fprintf(e.stdout, "skipped %s:\n", plural(len(sum.Skipped), "unreadable line"))
		for i, s := range sum.Skipped {
			if i == 20 {
				fmt.Fprintf(e.stdout, "  ... and %d more (--json lists all)\n", len(sum.Skipped)-20)
				break
			}
			fmt.Fprintf(e.stdout, "  %s\n", model.OneLine(s.String(), 200))
		}
	}
	printEmpty(e, sum.Empty)
	if len(sum.SkippedFiles) > 0 {
		what := "paths that are not files"
		if len(sum.SkippedFiles) == 1 {
			what = "path that is not a file"
		}
		fmt.Fprintf(e.stdout, "skipped %d %s tine can read:\n", len(sum.SkippedFiles), what)
		for _, s := range sum.SkippedFiles {
			fmt.Fprintf(e.stdout, "  %s\n", model.OneLine(s.Path+": "+s.Reason, 300))
		}
	}
	// Paths and errors come from disk: neutralised like transcript text.
	for _, msg := range sum.Errors {
		fmt.Fprintf(e.stderr, "tine: %s\n", model.OneLine(msg, 0))
	}
}

// printEmpty says which files held no message, and what those that
// counted tokens counted: the file is read, and there is nothing to show.
func printEmpty(e *env, files []importer.EmptyFile) {
	if len(files) == 0 {
		return
	}
	var counted []importer.EmptyFile
	for _, f := range files {
		if !f.Usage.IsZero() {
			counted = append(counted, f)
		}
	}
	held := fmt.Sprintf("%d files held", len(files))
	if len(files) == 1 {
		held = "1 file held"
	}
	switch {
	case len(counted) == 0:
		fmt.Fprintf(e.stdout, "%s no messages: nothing to show (--json lists them)\n", held)
		return
	case len(counted) == len(files):
		fmt.Fprintf(e.stdout, "%s no messages, only token counts: nothing to show, the tokens not counted in any run:\n", held)
	default:
		fmt.Fprintf(e.stdout, "%s no messages: nothing to show; these counted tokens, not counted in any run:\n", held)
	}
	for i, f := range counted {
		if i == 20 {
			fmt.Fprintf(e.stdout, "  ... and %d more (--json lists all)\n", len(counted)-20)
			break
		}
		fmt.Fprintf(e.stdout, "  %s\n", model.OneLine(f.Path+": "+importer.UsageText(f.Usage), 300))
	}
}

// printCounts prints the summary's first line: what was imported.
func printCounts(e *env, sum importer.Summary) {
	fmt.Fprintf(e.stdout, "imported %s, %s from %s (%.1f MB in %.2fs)", plural(sum.Runs, "run"), plural(sum.Messages, "message"),
		plural(sum.Files, "file"), float64(sum.Bytes)/1e6, sum.Seconds)
	var notes []string
	if sum.Unchanged > 0 {
		notes = append(notes, fmt.Sprintf("%d unchanged", sum.Unchanged))
	}
	if sum.Appended > 0 {
		grown := fmt.Sprintf("%d grown, read from where they stopped", sum.Appended)
		if sum.Appended == 1 {
			grown = "1 grown, read from where it stopped"
		}
		notes = append(notes, grown)
	}
	if sum.Reread > 0 {
		notes = append(notes, fmt.Sprintf("%d rewritten, read again", sum.Reread))
	}
	if sum.Failed > 0 {
		notes = append(notes, fmt.Sprintf("%d failed", sum.Failed))
	}
	if len(notes) > 0 {
		fmt.Fprintf(e.stdout, "; %s", strings.Join(notes, ", "))
	}
	fmt.Fprintln(e.stdout)
}

// progressBar draws import progress on a terminal, one line redrawn.
type progressBar struct {
	w    io.Writer
	last time.Time
}

func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return nil
	}
	return &progressBar{w: w}
}

func (b *progressBar) update(p importer.Progress) {
	if time.Since(b.last) < 100*time.Millisecond && p.FilesDone < p.Files {
		return
	}
	b.last = time.Now()
	const width = 30
	frac := 1.0
	if p.Bytes > 0 {
		frac = float64(p.BytesDone) / float64(p.Bytes)
	}
	filled := int(frac * width)
	secs := max(time.Since(p.Started).Seconds(), 0.001)
	fmt.Fprintf(b.w, "\r\x1b[K[%s%s] %d/%d files · %.1f/%.1f MB · %.0f records/s",
		strings.Repeat("█", filled), strings.Repeat("░", width-filled), p.FilesDone, p.Files,
		float64(p.BytesDone)/1e6, float64(p.Bytes)/1e6, float64(p.Records)/secs)
}

func (b *progressBar) done() { fmt.Fprint(b.w, "\r\x1b[K") }
