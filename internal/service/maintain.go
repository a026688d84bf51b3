package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"tine/harness/importer"
	"tine/harness/place"
	"tine/harness/worktree"
	"tine/model"
)

// ImportRequest asks for transcripts to be imported: Paths (files, and
// the .jsonl/.json files in folders), or none for every session of every
// agent on this machine.
type ImportRequest struct {
	Paths []string
	// Format is auto (or "") or a format's name.
	Format string
	// Progress hears how far the import is.
	Progress func(importer.Progress)
}

// Discover lists what an import of paths reads.
func (s *Service) Discover(paths []string) ([]importer.Found, error) {
	if len(paths) == 0 {
		return importer.Discover(s.Formats)
	}
	return importer.Expand(paths)
}

// Import imports what req names; a file that fails is said in the
// summary, and the rest imported. A failing database stops it
// (importer.StoreError).
func (s *Service) Import(ctx context.Context, req ImportRequest) (importer.Summary, error) {
	format := req.Format
	if format == "" {
		format = "auto"
	}
	if format != "auto" && !strings.Contains(","+strings.Join(s.Formats.Names(), ",")+",", ","+format+",") {
		return importer.Summary{}, invalidf("import: --format is auto, %s, not %q", strings.Join(s.Formats.Names(), ", "), format)
	}
	if err := s.writable(); err != nil {
		return importer.Summary{}, err
	}
	files, err := s.Discover(req.Paths)
	if err != nil {
		return importer.Summary{}, refused(fmt.Errorf("import: %w", err))
	}
	return s.ImportFound(ctx, files, format, req.Progress)
}

// ImportFound imports files found already (Discover).
func (s *Service) ImportFound(ctx context.Context, files []importer.Found, format string, progress func(importer.Progress)) (importer.Summary, error) {
	return importer.Import(ctx, s.Store, files, importer.Options{Formats: s.Formats, Format: format, Progress: progress})
}

// GCRequest asks what tine no longer needs to be removed.
type GCRequest struct {
	// TapesOlderThan: the tapes of runs that ended longer ago go.
	TapesOlderThan time.Duration
	DryRun         bool
}

// GC removes what tine no longer needs: old tapes, the worktrees of runs
// that are gone (one with uncommitted work is kept), what forks in
// containers left that nothing needs, and the database's free space.
func (s *Service) GC(ctx context.Context, req GCRequest) (GC, error) {
	if req.TapesOlderThan < 0 {
		return GC{}, invalidf("gc: --tapes-older-than cannot be negative")
	}
	if !req.DryRun {
		if err := s.writable(); err != nil {
			return GC{}, err
		}
	}
	st := s.Store
	dry := req.DryRun
	out := GC{DryRun: dry, Tapes: []string{}, Worktrees: []string{}, Kept: []string{}, Recent: []string{},
		Containers: []string{}, Images: []string{}}
	tapes, err := st.OldTapes(ctx, time.Now().Add(-req.TapesOlderThan))
	if err != nil {
		return out, err
	}
	for _, t := range tapes {
		out.Tapes = append(out.Tapes, t.RunID)
		out.TapeSteps += t.Steps
		out.TapeBytes += t.Bytes
	}
	// Another gc, or a prune, removing worktrees waits (and this one for
	// it), so that two never remove one worktree.
	root := WorktreesOf(st.Path())
	unlock, err := worktree.LockRoot(ctx, root)
	if err != nil {
		return out, err
	}
	defer unlock()
	// A fork's worktree is made before its run records it: one made too
	// lately to tell from such a one is left alone, and which runs hold
	// one is read after the folders are, so a worktree recorded meanwhile
	// is held.
	var dirs []string
	found, _ := filepath.Glob(filepath.Join(root, "*", "*"))
	for _, d := range found {
		made, ok := worktree.Made(d)
		switch {
		case !ok:
			// Being added by git now, or no worktree of tine's.
		case time.Since(made) < worktree.Settle:
			out.Recent = append(out.Recent, d)
		default:
			dirs = append(dirs, d)
		}
	}
	held, err := st.Worktrees(ctx)
	if err != nil {
		return out, err
	}
	recent := out.Recent[:0]
	for _, d := range out.Recent {
		if !held[d] {
			recent = append(recent, d)
		}
	}
	out.Recent = recent
	for _, d := range dirs {
		if info, err := os.Stat(d); err != nil || !info.IsDir() || held[d] {
			continue
		}
		unsaved, err := worktree.Unsaved(ctx, worktree.Worktree{Path: d})
		switch {
		case err != nil:
			continue // not a worktree of tine's: left alone
		case unsaved > 0:
			out.Kept = append(out.Kept, d)
		default:
			out.Worktrees = append(out.Worktrees, d)
		}
	}
	before := dbSize(st.Path())
	if !dry {
		if err := st.DeleteTapes(ctx, out.Tapes); err != nil {
			return out, err
		}
		for i, d := range out.Worktrees {
			// The branch stays: it may hold commits, and its run is gone.
			if err := worktree.Remove(ctx, worktree.Worktree{Path: d}, false); err != nil {
				out.Worktrees = out.Worktrees[:i]
				return out, fmt.Errorf("gc: %w", err)
			}
		}
		if err := st.Compact(ctx); err != nil {
			out.Note = model.OneLine(err.Error(), 200)
		}
	}
	if err := s.collectPlaces(ctx, dry, &out); err != nil {
		out.Note = strings.TrimSpace(out.Note + " " + model.OneLine(err.Error(), 200))
	}
	if !dry {
		out.BytesFreed = max(before-dbSize(st.Path()), 0)
	}
	return out, nil
}

// WorktreesOf is where the forks of the database at db get their
// worktrees: beside it, as private as it is.
func WorktreesOf(db string) string {
	return filepath.Join(filepath.Dir(db), "worktrees")
}

// collectPlaces asks each place other than this machine that the store's
// forks ran in to stop what runs with no turn and remove what nothing
// needs (place/docker: Reap, Collect). A daemon that does not answer is
// said in the note, not an error: what is here was collected.
func (s *Service) collectPlaces(ctx context.Context, dry bool, out *GC) error {
	if s.Driver == nil {
		return nil
	}
	runs, err := s.Store.Runs(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, r := range runs {
		if r.Place == "" || seen[r.Place] {
			continue
		}
		seen[r.Place] = true
		pl, err := s.Driver.Places.Get(r.Place, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, ok := pl.(place.Collector)
		if !ok {
			continue
		}
		if !dry {
			n, err := c.Reap(ctx)
			out.Stopped += n
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Place, err))
				continue
			}
		}
		got, err := c.Collect(ctx, dry)
		out.Containers = append(out.Containers, got.Containers...)
		out.Images = append(out.Images, got.Images...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Place, err))
		}
	}
	return errors.Join(errs...)
}

// dbSize is the database's size on disk, its log included.
func dbSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if info, err := os.Stat(p); err == nil {
			n += info.Size()
		}
	}
	return n
}

// ParseAge reads an age: a Go duration, or a number of days ("30d").
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) {
			return 0, fmt.Errorf("%q is no number of days", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is no age (30d, 12h, 90m)", s)
	}
	return d, nil
}
