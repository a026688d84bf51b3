// Package importer brings the transcripts already on this machine into
// tine, for every harness alike: it finds the session files in the
// folders each backend's descriptor names (harness.Sessions), detects
// their format, parses them with the backend that owns it, and stores
// them through a small interface the store satisfies; it names no agent. It reads only what changed: an
// unchanged file is skipped by size and time, a grown one is read from
// where the last import stopped, and one rewritten in place is read again.
package importer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/model"
)

// Store is what an import writes through; *store.Store satisfies it.
type Store interface {
	Sources(ctx context.Context) (map[string]model.Source, error)
	RunsBySource(ctx context.Context, path string) ([]model.Run, error)
	// ImportFile stores a file's runs; for a file read before, they
	// replace what it held, in the same transaction (as does SkipFile).
	ImportFile(ctx context.Context, src model.Source, runs []model.FileRun) ([]model.Run, error)
	AppendFile(ctx context.Context, src model.Source, runID string, msgs []model.Message, u model.Usage) error
	SkipFile(ctx context.Context, src model.Source, reason string) error
	// DrivenRun finds the fork tine ran as the session nativeID, whichever
	// harness drove it (Claude Code behind an ACP agent keeps its session
	// under the ACP run's id).
	DrivenRun(ctx context.Context, harness, nativeID string) (model.Run, bool, error)
	// SetImportedEnd records how a grown file's run ends now (a Codex
	// rollout read mid-turn ends interrupted until the turn completes).
	SetImportedEnd(ctx context.Context, runID string, st model.Status, errText string, finished time.Time) error
}

// Format is a transcript format tine reads: a backend's Sessions, under
// the backend's name.
type Format struct {
	Name string
	harness.Sessions
}

// Formats are the formats an import reads, in detection order.
type Formats []Format

// FormatsOf are the formats of agents that have sessions tine reads, in
// the agents' order.
func FormatsOf(agents []harness.Agent) Formats {
	var fmts Formats
	for _, a := range agents {
		if a.Sessions != nil {
			fmts = append(fmts, Format{Name: a.Name, Sessions: *a.Sessions})
		}
	}
	return fmts
}

// Named returns the format called name.
func (fmts Formats) Named(name string) (Format, bool) {
	for _, f := range fmts {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// Names lists the formats' names.
func (fmts Formats) Names() []string {
	var names []string
	for _, f := range fmts {
		names = append(names, f.Name)
	}
	return names
}

// Found is a transcript file discovery turned up, or a path it could not
// use and says why.
type Found struct {
	Path   string
	Format string // "" when it must be detected
	// Size and MTime are the file's, or, for a symlink, its target's; for
	// a session of an agent's database (entry), its share of the
	// database's size and its last update.
	Size  int64
	MTime time.Time
	// Skip, when set, says why Path is not read: it is no regular file (a
	// named pipe, a socket, a device: opening one could block forever), a
	// broken symlink, or a symlink loop. Import lists it in
	// Summary.SkippedFiles.
	Skip string
	// Err, when set, is why Path (a folder) could not be read. Import
	// counts it as failed.
	Err error
	// entry, when set, is the session of an agent's database that Path
	// names (harness.EntryPath): it is read from there, and its
	// fingerprint and MTime tell whether it changed.
	entry *entry
}

// source is what the store keeps of f to tell whether it changed since:
// its size and time, or a database session's fingerprint and time.
func (f Found) source() model.Source {
	src := model.Source{Path: f.Path, Format: f.Format, Size: f.Size, MTime: f.MTime}
	if f.entry != nil {
		src.Size = f.entry.fingerprint
	}
	return src
}

// Discover lists the session files in the default folders of every
// format.
// A format that keeps its sessions in one database lists each of them.
func Discover(formats Formats) ([]Found, error) {
	found, err := discover(formats, os.ReadDir)
	if err != nil {
		return nil, err
	}
	return append(found, formats.databases(context.Background())...), nil
}

func discover(formats Formats, readDir func(string) ([]fs.DirEntry, error)) ([]Found, error) {
	w := newWalker(readDir, ".jsonl") // agents write JSON lines; their .json files are other things
	for _, f := range formats {
		if f.Dirs == nil {
			continue
		}
		w.want = f.Files // a format that names its own files (Gemini CLI's older session-*.json)
		for _, dir := range f.Dirs() {
			n := len(w.found)
			if err := w.root(dir); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, err
			}
			for i := n; i < len(w.found); i++ {
				if w.found[i].Skip == "" && w.found[i].Err == nil {
					w.found[i].Format = f.Name
				}
			}
		}
	}
	return w.found, nil
}

// Expand turns paths (files or folders) into the transcript files they name.
// A path that does not exist is an error; what cannot be read inside a
// folder is listed with why (Found.Skip, Found.Err).
func Expand(paths []string) ([]Found, error) { return expand(paths, os.ReadDir) }

func expand(paths []string, readDir func(string) ([]fs.DirEntry, error)) ([]Found, error) {
	w := newWalker(readDir, ".jsonl", ".json")
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			if !info.Mode().IsRegular() {
				w.found = append(w.found, Found{Path: abs, Skip: notAFile(info.Mode())})
				continue
			}
			w.found = append(w.found, Found{Path: abs, Size: info.Size(), MTime: info.ModTime()})
			continue
		}
		if err := w.root(p); err != nil {
			return nil, err
		}
	}
	found := w.found
	slices.SortFunc(found, func(a, b Found) int { return strings.Compare(a.Path, b.Path) })
	return slices.CompactFunc(found, func(a, b Found) bool { return a.Path == b.Path }), nil
}

// walker lists the files under some folders whose names end in one of
// exts, leaving out Claude Code's subagent sidecars (agent-<id>.meta.json).
// It follows symlinks, to folders and to files, reading each real folder
// and listing each real file once, so a symlink loop ends (reported) and a
// file reached twice is imported once. What it cannot use it lists with
// why, rather than hang on it (a FIFO) or drop it silently (an unreadable
// folder).
type walker struct {
	exts []string
	// want, when set, tells the files wanted by name instead of exts.
	want    func(name string) bool
	readDir func(string) ([]fs.DirEntry, error)
	dirs    map[string]bool // real paths of the folders read
	files   map[string]bool // real paths of the files listed
	found   []Found
}

func newWalker(readDir func(string) ([]fs.DirEntry, error), exts ...string) *walker {
	return &walker{exts: exts, readDir: readDir, dirs: map[string]bool{}, files: map[string]bool{}}
}

// root walks the folder dir. It fails only when dir cannot be found;
// everything else is listed in w.found.
func (w *walker) root(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	info, err := os.Stat(abs) // a symlinked root is followed
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		w.found = append(w.found, Found{Path: abs, Err: err})
		return nil
	}
	if !info.IsDir() {
		w.file(abs, abs, info)
		return nil
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		w.found = append(w.found, Found{Path: abs, Err: err})
		return nil
	}
	w.dir(abs, real)
	return nil
}

// dir reads the folder path, whose real (symlink-free) path is real.
func (w *walker) dir(path, real string) {
	if w.dirs[real] {
		return // read already, under another name
	}
	w.dirs[real] = true
	entries, err := w.readDir(path)
	if err != nil {
		// The entries read before the error are still walked.
		w.found = append(w.found, Found{Path: path, Err: fmt.Errorf("cannot read the folder: %w", err)})
	}
	for _, e := range entries {
		p, r := filepath.Join(path, e.Name()), filepath.Join(real, e.Name())
		t := e.Type()
		switch {
		case t.IsDir():
			w.dir(p, r)
		case t&fs.ModeSymlink != 0:
			w.symlink(p, real)
		case w.wanted(e.Name()):
			info, err := e.Info()
			if err != nil {
				continue // gone since the folder was read
			}
			w.file(p, r, info)
		}
	}
}

// symlink follows the link p in the folder whose real path is parent.
func (w *walker) symlink(p, parent string) {
	info, err := os.Stat(p)
	if err == nil && !info.IsDir() && !w.wanted(filepath.Base(p)) {
		return
	}
	var target string
	if err == nil {
		target, err = filepath.EvalSymlinks(p)
	}
	switch {
	case errors.Is(err, syscall.ELOOP):
		w.found = append(w.found, Found{Path: p, Skip: "a symlink loop: " + errReason(err)})
		return
	case err != nil && w.wanted(filepath.Base(p)):
		w.found = append(w.found, Found{Path: p, Skip: "a symlink that leads nowhere: " + errReason(err)})
		return
	case err != nil:
		return // a broken link to something tine would not read anyway
	}
	if !info.IsDir() {
		w.file(p, target, info)
		return
	}
	if target == parent || strings.HasPrefix(parent, target+string(filepath.Separator)) {
		w.found = append(w.found, Found{Path: p, Skip: "a symlink loop: it leads back to " + target + ", which is being read"})
		return
	}
	w.dir(p, target)
}

// file lists the file p (real path real) that info describes: a symlink's
// target's size and time, so a grown target is read again.
func (w *walker) file(p, real string, info fs.FileInfo) {
	if !w.wanted(filepath.Base(p)) {
		return
	}
	if !info.Mode().IsRegular() {
		w.found = append(w.found, Found{Path: p, Skip: notAFile(info.Mode())})
		return
	}
	if w.files[real] {
		return
	}
	w.files[real] = true
	w.found = append(w.found, Found{Path: p, Size: info.Size(), MTime: info.ModTime()})
}

func (w *walker) wanted(name string) bool {
	if w.want != nil {
		return w.want(name)
	}
	name = strings.ToLower(name)
	return slices.Contains(w.exts, filepath.Ext(name)) && !strings.HasSuffix(name, ".meta.json")
}

// notAFile says why a path of mode m is not read.
func notAFile(m fs.FileMode) string {
	kind := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	case m.IsDir():
		kind = "a folder"
	}
	return kind + ", not a file: not read (reading it could wait forever)"
}

// errReason is err without the path it repeats.
func errReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Progress is how far an import has got.
type Progress struct {
	Files, FilesDone int
	Bytes, BytesDone int64
	Records          int64 // lines read
	Started          time.Time
	Current          string
}

// Summary is what an import did.
type Summary struct {
	Files     int `json:"files"`
	Unchanged int `json:"unchanged"`
	Appended  int `json:"appended"`
	Reread    int `json:"reread"`
	// Driven counts sessions that forks tine ran had already stored.
	Driven   int            `json:"driven"`
	Failed   int            `json:"failed"`
	Runs     int            `json:"runs"`
	Messages int            `json:"messages"`
	Bytes    int64          `json:"bytes"`
	Records  int64          `json:"records"`
	Seconds  float64        `json:"seconds"`
	Skipped  []harness.Skip `json:"skipped"`
	// SkippedFiles are paths not read, with why (Found.Skip).
	SkippedFiles []FileSkip `json:"skipped_files"`
	// Empty are the files read that held no message: nothing to show,
	// though some counted tokens (a rollout of token counts only).
	Empty []EmptyFile `json:"empty"`
	// Errors say what failed, one line each, made safe for a terminal.
	Errors []string `json:"errors"`
	RunIDs []string `json:"run_ids"`
}

// newSummary is an empty summary whose lists are empty, not null, in JSON.
func newSummary() Summary {
	return Summary{Skipped: []harness.Skip{}, SkippedFiles: []FileSkip{}, Empty: []EmptyFile{}, Errors: []string{}, RunIDs: []string{}}
}

// EmptyFile is a file an import read that held no message, and the
// tokens it counted all the same.
type EmptyFile struct {
	Path  string      `json:"path"`
	Usage model.Usage `json:"usage"`
}

// empty notes a file that held no message, and stores it as read so an
// unchanged file is not read again. The tokens it counted are said (in
// the summary and the file's reason) rather than stored on a run: a run
// without messages has nothing to open, fork or replay, and would stand
// in the library as an empty conversation.
func empty(ctx context.Context, st Store, src model.Source, u model.Usage, sum *Summary) error {
	sum.Empty = append(sum.Empty, EmptyFile{Path: src.Path, Usage: u})
	reason := "no messages"
	if !u.IsZero() {
		reason = "no messages, only token counts (" + UsageText(u) + "): nothing to show"
	}
	return st.SkipFile(ctx, src, reason)
}

// UsageText says u in words: "1200 input, 300 cached, 40 output tokens".
func UsageText(u model.Usage) string {
	parts := []string{fmt.Sprintf("%d input", u.InputTokens)}
	if u.CacheReadTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d cached", u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d cache-write", u.CacheWriteTokens))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(", %d output tokens", u.OutputTokens)
}

// unshown is the usage of a parsed file's runs that hold no message.
func unshown(pf harness.ParsedFile) model.Usage {
	var u model.Usage
	for _, pr := range pf.Runs {
		if pr.Len() == 0 {
			u = u.Add(pr.Run.Usage)
		}
	}
	return u
}

// FileSkip is a path an import did not read, and why.
type FileSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Options tune an import.
type Options struct {
	// Formats are the formats it reads (FormatsOf the registry's agents).
	Formats Formats
	// Format forces a format; "" or "auto" detects it per file.
	Format string
	// Progress, when set, is called after every file.
	Progress func(Progress)
}

// Import brings files into st. A file that cannot be read is counted and
// reported, never fatal to the rest. A failure of the database itself (a
// full disk, a damaged or read-only file) stops the import at once with a
// *StoreError: every later file would fail the same way, and a damaged
// file must not be written to. The summary then says what was done before.
func Import(ctx context.Context, st Store, files []Found, opts Options) (Summary, error) {
	sum := newSummary()
	start := time.Now()
	if opts.Format != "" && opts.Format != "auto" {
		if _, ok := opts.Formats.Named(opts.Format); !ok {
			return sum, fmt.Errorf("unknown format %q (known: auto, %s)", opts.Format, strings.Join(opts.Formats.Names(), ", "))
		}
	}
	files = opts.Formats.expandDatabases(ctx, files)
	known, err := taggedStore{st}.Sources(ctx)
	if err != nil {
		if se := storeFailure(err, ""); se != nil {
			return sum, se
		}
		return sum, err
	}
	prog := Progress{Started: start}
	for _, f := range files {
		if f.Skip == "" && f.Err == nil {
			prog.Files++
			prog.Bytes += f.Size
		}
	}
	batcher, _ := st.(batchStore)
	st = taggedStore{st}
	// The real store answers reads from any goroutine: the readers look
	// for tine's own sessions too, off the writer's path.
	var reader Store
	if batcher != nil {
		reader = st
	}
	pre := prefetch(ctx, files, known, opts, reader)
	defer pre.stop()
	b := &batch{st: st, bs: batcher, sum: &sum}
	fail := func(path string, err error) *StoreError {
		sum.Failed++
		if se := storeFailure(err, path); se != nil {
			sum.Seconds = time.Since(start).Seconds()
			return se
		}
		// The path comes from disk: it passes through the same
		// neutraliser as transcript text (ARCHITECTURE.md, terminal
		// safety).
		sum.Errors = append(sum.Errors, model.OneLine(path+": "+model.OneLine(err.Error(), 300), 0))
		return nil
	}
	b.fail = fail
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		if f.Skip != "" || f.Err != nil {
			listUnread(f, &sum)
			continue
		}
		sum.Files++
		prog.Current = f.Path
		if opts.Format != "" && opts.Format != "auto" {
			f.Format = opts.Format
		}
		var err error
		if pre.waits(i) && b.bytes >= minBatchBytes {
			// The next file is still being parsed: store what is parsed
			// meanwhile rather than wait with it (at the start, the
			// writer would wait for a whole batch).
			err = b.flush(ctx)
		}
		if err == nil {
			err = b.next(ctx, pre, i, f, known[f.Path], opts)
		}
		if err != nil {
			var se *StoreError
			if errors.As(err, &se) {
				sum.Seconds = time.Since(start).Seconds()
				return sum, se
			}
			if se := fail(f.Path, err); se != nil {
				return sum, se
			}
		}
		prog.FilesDone++
		prog.BytesDone += f.Size
		prog.Records = sum.Records
		if opts.Progress != nil {
			opts.Progress(prog)
		}
	}
	if err := b.flush(ctx); err != nil {
		var se *StoreError
		if errors.As(err, &se) {
			sum.Seconds = time.Since(start).Seconds()
			return sum, se
		}
		return sum, err
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// listUnread lists in sum a path discovery could not use (f.Skip or
// f.Err set).
func listUnread(f Found, sum *Summary) {
	if f.Skip != "" {
		sum.SkippedFiles = append(sum.SkippedFiles, FileSkip{Path: f.Path, Reason: f.Skip})
		return
	}
	sum.Failed++
	sum.Errors = append(sum.Errors, model.OneLine(f.Path+": "+f.Err.Error(), 400))
}

// Unchanged is the summary Import gives for files when every one is
// unchanged since the import that stored known (each file's size and time
// as the store holds them), worked out without the store. ok is false when
// any file would be read, or is skipped or failed: Import must run.
func Unchanged(files []Found, known map[string]model.Source) (sum Summary, ok bool) {
	sum = newSummary()
	for _, f := range files {
		if f.Skip != "" || f.Err != nil || !unchanged(known[f.Path], f.source()) {
			return Summary{}, false
		}
		sum.Files++
		sum.Unchanged++
	}
	return sum, true
}

// unchanged reports whether a file of now's size and time is as the store
// holds it (prev, zero when it was never imported): then it is not read.
func unchanged(prev, now model.Source) bool {
	return prev.Path != "" && !now.MTime.IsZero() && prev.Size == now.Size && prev.MTime.Equal(now.MTime)
}

// batchStore is a Store that can write several files in one transaction,
// each file still all or nothing (*store.Store does: a batch that a file
// fails in is written again with a savepoint per file).
type batchStore interface {
	ImportFiles(ctx context.Context, n int, file func(i int) (model.Source, []model.FileRun),
		done func(i int, created []model.Run, err error), fatal func(i int, err error) bool) error
}

// parsedFile is a file never imported before, read and parsed ahead of
// the writer: all an import needs to store it.
type parsedFile struct {
	path    string
	src     model.Source
	runs    []model.FileRun
	skipped []harness.Skip
	unshown model.Usage // what its runs without messages counted, when none has one
	// held, when set, is what the runs' streams read: closed once they
	// are stored (close).
	held    io.Closer
	bytes   int64
	records int64
	err     error
	// checked: the reader looked whether tine ran this session (DrivenRun).
	checked   bool
	driven    model.Run
	isDriven  bool
	drivenErr error
}

// close lets go of what the file's runs' streams read, once stored.
func (p *parsedFile) close() {
	if p.held != nil {
		p.held.Close()
		p.held = nil
	}
}

// parseWhole parses a whole file for the importer, which stores the runs
// and then closes what they read (ParsedFile.Close): a format's
// ParseStream when it has one.
func (f Format) parseWhole(r io.Reader, name string) (harness.ParsedFile, error) {
	if f.ParseStream != nil {
		return f.ParseStream(r, name)
	}
	return f.Parse(r, name)
}

// readNew reads and parses a file never imported before; it writes nothing.
func (fmts Formats) readNew(f Found) parsedFile {
	p := parsedFile{path: f.Path, src: f.source()}
	if f.entry != nil {
		return fmts.readEntry(f, p)
	}
	if p.src.MTime.IsZero() {
		info, err := os.Stat(f.Path)
		if err != nil {
			p.err = err
			return p
		}
		p.src.Size, p.src.MTime = info.Size(), info.ModTime()
	}
	file, err := openRegular(f.Path)
	if err != nil {
		p.err = err
		return p
	}
	defer file.Close()
	if p.src.Format == "" {
		if p.src.Format, p.err = fmts.detect(file, f.Path); p.err != nil {
			return p
		}
		if _, p.err = file.Seek(0, io.SeekStart); p.err != nil {
			return p
		}
	}
	format, ok := fmts.Named(p.src.Format)
	if !ok {
		p.err = fmt.Errorf("unknown format %q", p.src.Format)
		return p
	}
	counter := &lineCounter{r: file}
	parsed, err := format.parseWhole(counter, f.Path)
	p.held = parsed.Held
	p.bytes, p.records, p.skipped = counter.n, counter.lines, parsed.Skipped
	if counter.n >= collectAfter {
		// A long session's parser leaves its records behind, hundreds of
		// MB of them, and the heap may grow to twice what was live when it
		// was last collected, mid-parse: collected now, the writer's own
		// garbage does not pile on top of it.
		runtime.GC()
	}
	if err != nil {
		p.err = err
		return p
	}
	p.src.Offset = parsed.Offset
	if format.IDField != "" {
		p.src.Leaf = lastChainID(file, p.src.Offset, format)
	}
	p.runs = fileRuns(parsed, format.Name)
	if len(p.runs) == 0 {
		p.unshown = unshown(parsed)
	}
	return p
}

// collectAfter is the size of a file after whose parse the heap is
// collected at once.
const collectAfter = 64 << 20

// readEntry is readNew for a session of an agent's database.
func (fmts Formats) readEntry(f Found, p parsedFile) parsedFile {
	format, ok := fmts.Named(p.src.Format)
	if !ok {
		p.err = fmt.Errorf("unknown format %q", p.src.Format)
		return p
	}
	r, err := f.entry.read(context.Background())
	if err != nil {
		p.err = err
		return p
	}
	counter := &lineCounter{r: r}
	parsed, err := format.Parse(counter, f.Path)
	p.bytes, p.records, p.skipped = counter.n, counter.lines, parsed.Skipped
	if err != nil {
		p.err = err
		return p
	}
	p.src.Offset = parsed.Offset
	p.runs = fileRuns(parsed, format.Name)
	if len(p.runs) == 0 {
		p.unshown = unshown(parsed)
	}
	return p
}

// prefetcher parses the files never imported before on every core, ahead
// of the one writer, which takes them in order. The readers run up to a
// batch (batchBytes of files) ahead, so that they go on parsing the next
// batch while the writer stores the last one; with only a few files ahead
// they sat idle during every commit and the writer then waited for them.
type prefetcher struct {
	results map[int]chan parsedFile
	sizes   map[int]int64
	mu      sync.Mutex
	moved   *sync.Cond // ahead went down, or stopped
	ahead   int64      // bytes of the files given to the readers, not yet taken
	stopped bool
	quit    chan struct{}
}

func prefetch(ctx context.Context, files []Found, known map[string]model.Source, opts Options, st Store) *prefetcher {
	p := &prefetcher{results: map[int]chan parsedFile{}, sizes: map[int]int64{}, quit: make(chan struct{})}
	p.moved = sync.NewCond(&p.mu)
	var order []int
	todo := map[int]Found{}
	for i, f := range files {
		if f.Skip == "" && f.Err == nil && known[f.Path].Path == "" {
			if opts.Format != "" && opts.Format != "auto" {
				f.Format = opts.Format
			}
			todo[i] = f
			p.results[i] = make(chan parsedFile, 1)
			p.sizes[i] = max(f.Size, 1)
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return p
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for _, i := range order {
			p.mu.Lock()
			for p.ahead > 0 && p.ahead+p.sizes[i] > batchBytes && !p.stopped {
				p.moved.Wait()
			}
			stopped := p.stopped
			p.ahead += p.sizes[i]
			p.mu.Unlock()
			if stopped {
				return
			}
			select {
			case jobs <- i:
			case <-p.quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			for i := range jobs {
				r := opts.Formats.readNew(todo[i])
				if st != nil && r.err == nil && len(r.runs) > 0 {
					r.checked = true
					r.driven, r.isDriven, r.drivenErr = st.DrivenRun(ctx, r.runs[0].Run.Harness, r.runs[0].Run.NativeID)
				}
				p.results[i] <- r
			}
		}()
	}
	return p
}

// waits reports whether file i is a new file not parsed yet.
func (p *prefetcher) waits(i int) bool {
	ch, ok := p.results[i]
	return ok && len(ch) == 0
}

// get returns file i parsed, or false when i is not a new file.
func (p *prefetcher) get(i int) (parsedFile, bool) {
	ch, ok := p.results[i]
	if !ok {
		return parsedFile{}, false
	}
	r := <-ch
	p.mu.Lock()
	p.ahead -= p.sizes[i]
	p.moved.Signal()
	p.mu.Unlock()
	return r, true
}

func (p *prefetcher) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.quit)
		p.moved.Broadcast()
	}
}

// batch gathers parsed files for the writer, so several are stored in one
// transaction (each file still all or nothing).
type batch struct {
	st    Store
	bs    batchStore // nil: the store writes a file at a time
	sum   *Summary
	fail  func(path string, err error) *StoreError
	files []parsedFile
	bytes int64
}

// next brings file i (f, prev as the store holds it) up to date.
func (b *batch) next(ctx context.Context, pre *prefetcher, i int, f Found, prev model.Source, opts Options) error {
	if p, ok := pre.get(i); ok {
		return b.add(ctx, p)
	}
	// A file read before: unchanged, appended to, or read again. Before
	// one is written, what was queued is stored, so files are written in
	// order.
	if !unchanged(prev, f.source()) {
		if err := b.flush(ctx); err != nil {
			return err
		}
	}
	return opts.Formats.importOne(ctx, b.st, f, prev, b.sum)
}

// batchBytes is how much transcript a batch holds before it is written:
// fewer, bigger transactions rewrite the same index and tree pages less
// often (32 MB took a tenth less CPU than 8 MB on the benchmark corpus).
const batchBytes = 32 << 20

// minBatchBytes is the least a batch holds before the writer stores it
// because the next file is not parsed yet.
const minBatchBytes = 8 << 20

// add takes a parsed file; it is stored now or with the batch.
func (b *batch) add(ctx context.Context, p parsedFile) error {
	batched := false
	defer func() {
		if !batched {
			p.close()
		}
	}()
	sum := b.sum
	sum.Bytes += p.bytes
	sum.Records += p.records
	sum.Skipped = append(sum.Skipped, p.skipped...)
	if p.err != nil {
		return p.err
	}
	if len(p.runs) == 0 {
		if err := b.flush(ctx); err != nil {
			return err
		}
		return empty(ctx, b.st, p.src, p.unshown, sum)
	}
	// A session a fork of tine's ran in is that fork: its messages were
	// stored as they streamed.
	r, ok, err := p.driven, p.isDriven, p.drivenErr
	if !p.checked {
		r, ok, err = b.st.DrivenRun(ctx, p.runs[0].Run.Harness, p.runs[0].Run.NativeID)
	}
	if err != nil {
		return err
	} else if ok {
		sum.Driven++
		if err := b.flush(ctx); err != nil {
			return err
		}
		return b.st.SkipFile(ctx, p.src, "the session of fork "+r.Label()+", which tine ran; its messages are stored there")
	}
	if b.bs == nil {
		created, err := b.st.ImportFile(ctx, p.src, p.runs)
		if err != nil {
			return err
		}
		b.count(p, created)
		return nil
	}
	b.files = append(b.files, p)
	batched = true
	b.bytes += p.bytes // what was read: a database session's src.Size is its fingerprint
	if b.bytes >= batchBytes {
		return b.flush(ctx)
	}
	return nil
}

func (b *batch) count(p parsedFile, created []model.Run) {
	for i, r := range created {
		b.sum.Runs++
		b.sum.Messages += p.runs[i].Len()
		b.sum.RunIDs = append(b.sum.RunIDs, r.ID)
	}
}

// flush stores the files gathered. A file that fails is counted and
// reported like any other; a failing database stops the import
// (*StoreError), and then none of the batch is stored.
func (b *batch) flush(ctx context.Context) error {
	if len(b.files) == 0 {
		return nil
	}
	files := b.files
	b.files, b.bytes = nil, 0
	defer func() {
		for i := range files {
			files[i].close()
		}
	}()
	var stop *StoreError
	at := 0 // the file the transaction failed at
	err := b.bs.ImportFiles(ctx, len(files),
		func(i int) (model.Source, []model.FileRun) { return files[i].src, files[i].runs },
		func(i int, created []model.Run, err error) {
			if err != nil {
				if se := b.fail(files[i].path, tag(err)); se != nil && stop == nil {
					stop = se
				}
				return
			}
			b.count(files[i], created)
		},
		func(i int, err error) bool {
			if storeFailure(tag(err), "") != nil {
				at = i
				return true
			}
			return false
		})
	if err != nil {
		se := storeFailure(tag(err), files[at].path)
		for _, f := range files {
			b.sum.Failed++
			if se == nil {
				b.sum.Errors = append(b.sum.Errors, model.OneLine(f.path+": "+model.OneLine(err.Error(), 300), 0))
			}
		}
		if se != nil {
			return se
		}
		return nil
	}
	if stop != nil {
		return stop
	}
	return nil
}

// importOne brings one file up to date.
func (fmts Formats) importOne(ctx context.Context, st Store, f Found, prev model.Source, sum *Summary) error {
	src := f.source()
	if src.MTime.IsZero() {
		info, err := os.Stat(f.Path)
		if err != nil {
			return err
		}
		src.Size, src.MTime = info.Size(), info.ModTime()
	}
	// Discovery just read size and time: an unchanged file costs no more.
	if unchanged(prev, src) {
		sum.Unchanged++
		return nil
	}
	if f.entry != nil {
		// A changed session of a database: read again whole.
		if prev.Path != "" {
			sum.Reread++
		}
		p := fmts.readEntry(f, parsedFile{path: f.Path, src: src})
		sum.Bytes += p.bytes
		sum.Records += p.records
		sum.Skipped = append(sum.Skipped, p.skipped...)
		if p.err != nil {
			return p.err
		}
		return storeParsed(ctx, st, p.src, p.runs, p.unshown, sum)
	}
	file, err := openRegular(f.Path)
	if err != nil {
		return err
	}
	defer file.Close()
	if src.Format == "" {
		src.Format = prev.Format
	}
	if src.Format == "" {
		if src.Format, err = fmts.detect(file, f.Path); err != nil {
			return err
		}
	}
	format, ok := fmts.Named(src.Format)
	if !ok {
		return fmt.Errorf("unknown format %q", src.Format)
	}
	// A grown file of an appending format: read only the new bytes.
	if prev.Path != "" && format.Appends && prev.Format == src.Format && prev.Offset > 0 && src.Size > prev.Offset {
		done, err := appendTail(ctx, st, file, format, src, prev, sum)
		if err != nil || done {
			return err
		}
	}
	if prev.Path != "" {
		// Read again: ImportFile (or SkipFile) replaces what the file held
		// before in its own transaction, so a failure leaves that as it was.
		sum.Reread++
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	counter := &lineCounter{r: file}
	parsed, err := format.parseWhole(counter, f.Path)
	// Closed whatever err says: a stream that failed midway holds its
	// spill file too.
	defer func() { _ = parsed.Close() }()
	sum.Bytes += counter.n
	sum.Records += counter.lines
	sum.Skipped = append(sum.Skipped, parsed.Skipped...)
	if err != nil {
		return err
	}
	src.Offset = parsed.Offset
	if format.IDField != "" {
		src.Leaf = lastChainID(file, src.Offset, format)
	}
	return storeParsed(ctx, st, src, fileRuns(parsed, format.Name), unshown(parsed), sum)
}

// storeParsed stores a file read again (or a database's session): its
// runs, or that it holds none, or that it is a fork tine ran.
func storeParsed(ctx context.Context, st Store, src model.Source, runs []model.FileRun, none model.Usage, sum *Summary) error {
	if len(runs) == 0 {
		return empty(ctx, st, src, none, sum)
	}
	// A session a fork of tine's ran in is that fork: its messages were
	// stored as they streamed.
	if r, ok, err := st.DrivenRun(ctx, runs[0].Run.Harness, runs[0].Run.NativeID); err != nil {
		return err
	} else if ok {
		sum.Driven++
		return st.SkipFile(ctx, src, "the session of fork "+r.Label()+", which tine ran; its messages are stored there")
	}
	created, err := st.ImportFile(ctx, src, runs)
	if err != nil {
		return err
	}
	for i, r := range created {
		sum.Runs++
		sum.Messages += runs[i].Len()
		sum.RunIDs = append(sum.RunIDs, r.ID)
	}
	return nil
}

// appendTail reads a grown file from where the last import stopped and
// appends what it holds to the file's run. It reports false when the new
// bytes are not a plain continuation (a branch, a new session), so the
// caller reads the whole file again.
func appendTail(ctx context.Context, st Store, file *os.File, format Format, src, prev model.Source, sum *Summary) (bool, error) {
	runs, err := st.RunsBySource(ctx, src.Path)
	if err != nil || len(runs) != 1 {
		return false, err // nothing stored, or in-file branches: read it all
	}
	if format.IDField != "" {
		parent, ok := firstParent(file, prev.Offset, format)
		if !ok || prev.Leaf == "" || parent != prev.Leaf {
			return false, nil // the new records branch off elsewhere
		}
	}
	var r io.Reader
	if format.Header {
		head, err := firstLine(file)
		if err != nil {
			return false, nil
		}
		r = io.MultiReader(bytes.NewReader(head), io.NewSectionReader(file, prev.Offset, src.Size-prev.Offset))
		defer func() { sum.Bytes -= int64(len(head)) }()
		src.Offset = prev.Offset - int64(len(head)) // the parser counts the header line too
	} else {
		r = io.NewSectionReader(file, prev.Offset, src.Size-prev.Offset)
		src.Offset = prev.Offset
	}
	counter := &lineCounter{r: r}
	var parsed harness.ParsedFile
	if format.ParseTail != nil {
		parsed, err = format.ParseTail(counter, src.Path, file, prev.Offset)
	} else {
		parsed, err = format.Parse(counter, src.Path)
	}
	if err != nil {
		return false, nil
	}
	if len(parsed.Runs) > 1 || (len(parsed.Runs) == 1 && (parsed.Runs[0].Fork != nil || parsed.Runs[0].Subagent != nil)) {
		return false, nil
	}
	// A chained format's new part starts with a record whose parent is
	// the last one read before (firstParent said so): not in the part,
	// and not missing from the file. Any other record hanging off one
	// read before starts a branch there: the file is read again, as a
	// fresh import reads it.
	skipped := make([]harness.Skip, 0, len(parsed.Skipped))
	joined := false
	for _, s := range parsed.Skipped {
		switch {
		case s.MissingParent == "":
			skipped = append(skipped, s)
		case s.MissingParent == prev.Leaf && !joined:
			joined = true
		default:
			return false, nil
		}
	}
	sum.Bytes += counter.n
	sum.Records += counter.lines
	for _, s := range skipped {
		s.Line = -1 // line numbers of a tail are relative; say so rather than mislead
		sum.Skipped = append(sum.Skipped, s)
	}
	src.Offset += parsed.Offset
	var msgs []model.Message
	var u model.Usage
	if len(parsed.Runs) == 1 {
		msgs, u = parsed.Runs[0].Messages, parsed.Runs[0].Run.Usage
	}
	// A tail may not repeat what set the model (Codex's turn_context
	// comes once per turn): it is still the run's.
	for i := range msgs {
		if msgs[i].Role == model.Assistant && msgs[i].Model == "" {
			msgs[i].Model = runs[0].Model
		}
	}
	src.Leaf = prev.Leaf
	if format.IDField != "" {
		if leaf := lastChainID(file, src.Offset, format); leaf != "" {
			src.Leaf = leaf
		}
	}
	// The run's end as the file now says, before the file is recorded as
	// read: a crash between the two reads the tail again.
	if len(parsed.Runs) == 1 {
		pr := parsed.Runs[0].Run
		if pr.Status != runs[0].Status || pr.Error != runs[0].Error || pr.FinishedAt.After(runs[0].FinishedAt) {
			if err := st.SetImportedEnd(ctx, runs[0].ID, pr.Status, pr.Error, pr.FinishedAt); err != nil {
				return false, err
			}
		}
	}
	if err := st.AppendFile(ctx, src, runs[0].ID, msgs, u); err != nil {
		return false, err
	}
	sum.Appended++
	sum.Messages += len(msgs)
	return true, nil
}

// firstLine returns a file's first line, newline included; an error when
// it has no newline yet or is over the cap.
func firstLine(f *os.File) ([]byte, error) {
	lr := jsonl.NewReader(io.NewSectionReader(f, 0, 1<<40), jsonl.DefaultMax)
	defer lr.Close()
	if !lr.Next() {
		return nil, cmp.Or(lr.Err(), io.EOF)
	}
	switch l := lr.Line(); {
	case l.Partial:
		return nil, io.ErrUnexpectedEOF
	case l.TooLong:
		return nil, errors.New(lr.TooLongReason())
	default:
		return bytes.Clone(l.Raw), nil
	}
}

// chainRecord is the part of a record that places it in the chain.
func chainIDs(line []byte, format Format) (id, parent string, ok bool) {
	if !bytes.Contains(line, []byte(`"`+format.IDField+`"`)) {
		return "", "", false
	}
	var rec map[string]json.RawMessage
	if json.Unmarshal(line, &rec) != nil {
		return "", "", false
	}
	raw, has := rec[format.IDField]
	if !has || json.Unmarshal(raw, &id) != nil || id == "" {
		return "", "", false
	}
	if t, has := rec["type"]; has && string(t) == `"session"` {
		return "", "", false // pi's header has an id but is no record of the chain
	}
	json.Unmarshal(rec[format.ParentField], &parent)
	return id, parent, true
}

// firstParent is the parent of the first chained record at or after off,
// among the 256 complete lines there.
func firstParent(f *os.File, off int64, format Format) (string, bool) {
	lr := jsonl.NewReader(io.NewSectionReader(f, off, 1<<40), jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() && lr.Line().Number <= 256 {
		l := lr.Line()
		if l.Partial {
			break
		}
		if l.TooLong {
			continue
		}
		if _, parent, ok := chainIDs(l.Text, format); ok {
			return parent, true
		}
	}
	return "", false
}

// lastChainID is the id of the last chained record that ends before end,
// found by reading backwards a chunk at a time.
func lastChainID(f *os.File, end int64, format Format) string {
	const chunk = 64 << 10
	bufp := chunks.Get().(*[]byte)
	defer chunks.Put(bufp)
	var tail []byte // bytes after the last newline seen, for a line across chunks
	for pos := end; pos > 0 && end-pos < 64<<20; {
		n := min(int64(chunk), pos)
		pos -= n
		buf := (*bufp)[:n]
		if _, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
			return ""
		}
		data := buf
		if len(tail) > 0 {
			data = append(buf[:n:n], tail...)
		}
		// The lines after the chunk's first newline, last first.
		stop := len(data)
		for {
			i := bytes.LastIndexByte(data[:stop], '\n')
			if i < 0 {
				break
			}
			if id, _, ok := chainIDs(data[i+1:stop], format); ok {
				return id
			}
			stop = i
		}
		tail = bytes.Clone(data[:stop]) // buf is read into again
	}
	if id, _, ok := chainIDs(tail, format); ok {
		return id
	}
	return ""
}

// chunks are 64 KB buffers for reading a file's head and tail: every file
// an import reads needs them, briefly.
var chunks = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// fileRuns turns a parsed file into the runs to store.
func fileRuns(pf harness.ParsedFile, format string) []model.FileRun {
	var runs []model.FileRun
	for _, pr := range pf.Runs {
		if pr.Len() == 0 && pr.Parent < 0 {
			continue
		}
		fr := model.FileRun{Run: pr.Run, Messages: pr.Messages, Stream: pr.Stream, Parent: pr.Parent}
		if fr.Run.Harness == "" {
			fr.Run.Harness = format
		}
		if fr.Parent >= 0 {
			fr.Run.ForkAt = pr.ForkAt
		}
		if fr.Run.Status == "" {
			fr.Run.Status = model.Completed
		}
		switch {
		case pr.Fork != nil:
			fr.Link = &model.Link{Kind: model.LinkFork, Harness: fr.Run.Harness, ParentSession: pr.Fork.ParentSession,
				AfterMessage: pr.Fork.AfterMessage, BeforeOrdinal: pr.Fork.BeforeOrdinal, Inherited: pr.Fork.Inherited}
		case pr.Subagent != nil:
			fr.Link = &model.Link{Kind: model.LinkSubagent, Harness: fr.Run.Harness, ParentSession: pr.Subagent.ParentSession,
				ToolCall: pr.Subagent.ToolCallID}
		}
		runs = append(runs, fr)
	}
	// Dropping empty runs moves indexes: only keep parents that survived.
	if len(runs) != len(pf.Runs) {
		for i := range runs {
			if runs[i].Parent >= len(runs) {
				runs[i].Parent = -1
			}
		}
	}
	return runs
}

// detect tells a file's format from its first 64 KB.
func (fmts Formats) detect(f *os.File, path string) (string, error) {
	bufp := chunks.Get().(*[]byte)
	defer chunks.Put(bufp)
	head := *bufp
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	for _, fm := range fmts {
		if fm.Detect != nil && fm.Detect(head) {
			return fm.Name, nil
		}
	}
	return "", fmt.Errorf("not a transcript tine knows (formats: %s)", strings.Join(fmts.Names(), ", "))
}

// openRegular opens path for reading, refusing anything but a regular
// file. It opens without blocking, so a path that became a FIFO since it
// was listed fails at once instead of waiting for a writer forever.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, errors.New(notAFile(info.Mode()))
	}
	return f, nil
}

// StoreError is a failure of the database itself that stops an import:
// the disk is full, the file is damaged ("malformed"), read-only, or the
// disk failed. Nothing more is written after it.
type StoreError struct {
	// Reason says it for a person: "the disk is full".
	Reason string
	// Path is the file being imported when it happened ("" before any).
	Path string
	Err  error
	// said is what SQLite said when its error carries a code, else Err's
	// text: the store may already have said Reason in its own words.
	said string
}

func (e *StoreError) Error() string {
	at := ""
	if e.Path != "" {
		at = " at " + e.Path
	}
	said := e.said
	if said == "" && e.Err != nil {
		said = e.Err.Error()
	}
	return model.OneLine(fmt.Sprintf("import stopped%s: %s (%s); what was imported before is kept", at, e.Reason, said), 0)
}

func (e *StoreError) Unwrap() error { return e.Err }

// storedErr marks an error the store returned, so only the store's errors
// are taken for a failing database, never a transcript's text.
type storedErr struct{ err error }

func (e *storedErr) Error() string { return e.err.Error() }
func (e *storedErr) Unwrap() error { return e.err }

func tag(err error) error {
	if err == nil {
		return nil
	}
	return &storedErr{err}
}

// taggedStore marks the errors of the Store methods an import writes and
// reads through.
type taggedStore struct{ Store }

func (s taggedStore) Sources(ctx context.Context) (map[string]model.Source, error) {
	m, err := s.Store.Sources(ctx)
	return m, tag(err)
}

func (s taggedStore) RunsBySource(ctx context.Context, path string) ([]model.Run, error) {
	r, err := s.Store.RunsBySource(ctx, path)
	return r, tag(err)
}

func (s taggedStore) ImportFile(ctx context.Context, src model.Source, runs []model.FileRun) ([]model.Run, error) {
	r, err := s.Store.ImportFile(ctx, src, runs)
	return r, tag(err)
}

func (s taggedStore) AppendFile(ctx context.Context, src model.Source, runID string, msgs []model.Message, u model.Usage) error {
	return tag(s.Store.AppendFile(ctx, src, runID, msgs, u))
}

func (s taggedStore) SkipFile(ctx context.Context, src model.Source, reason string) error {
	return tag(s.Store.SkipFile(ctx, src, reason))
}

func (s taggedStore) DrivenRun(ctx context.Context, harness, nativeID string) (model.Run, bool, error) {
	r, ok, err := s.Store.DrivenRun(ctx, harness, nativeID)
	return r, ok, tag(err)
}

func (s taggedStore) SetImportedEnd(ctx context.Context, runID string, st model.Status, errText string, finished time.Time) error {
	return tag(s.Store.SetImportedEnd(ctx, runID, st, errText, finished))
}

// SQLite's primary result codes for a failing database.
const (
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteNotADB   = 26
)

// storeFailure returns the *StoreError err is when the store returned it
// and it says the database itself is failing, else nil. It reads the
// SQLite result code when the driver's error carries one (Code() int),
// else SQLite's own wording, else the system error.
func storeFailure(err error, path string) *StoreError {
	var se *storedErr
	if !errors.As(err, &se) {
		return nil
	}
	code := -1
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		code = coded.Code() & 0xff // an extended code's low byte is its primary code
	}
	msg := err.Error()
	reason := ""
	switch {
	case code == sqliteFull || errors.Is(err, syscall.ENOSPC) || strings.Contains(msg, "database or disk is full"):
		reason = "the disk is full; free some space and import again"
	case code == sqliteCorrupt || code == sqliteNotADB || strings.Contains(msg, "database disk image is malformed") ||
		strings.Contains(msg, "file is not a database"):
		reason = "the database file is damaged (SQLite calls it malformed); nothing more is written to it"
	case code == sqliteReadOnly || errors.Is(err, syscall.EROFS) || strings.Contains(msg, "readonly database"):
		reason = "the database is read-only"
	case code == sqliteIOErr || errors.Is(err, syscall.EIO) || strings.Contains(msg, "disk I/O error"):
		reason = "the disk failed to read or write the database"
	default:
		return nil
	}
	said := se.err.Error()
	if ce, ok := coded.(error); ok {
		said = ce.Error()
	}
	return &StoreError{Reason: reason, Path: path, Err: se.err, said: said}
}

// lineCounter counts the bytes and lines a parser reads.
type lineCounter struct {
	r     io.Reader
	n     int64
	lines int64
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}
