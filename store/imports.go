package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"tine/model"
)

// ImportFile stores the runs read from one file, records the file, and
// links them to the sessions they were forked from or spawned by, all in
// one transaction. A link whose other session is not stored yet is kept
// and resolved by the import that brings that session, so a fork ends up
// sharing its parent's prefix whichever file is imported first.
func (s *Store) ImportFile(ctx context.Context, src model.Source, runs []model.FileRun) ([]model.Run, error) {
	var created []model.Run
	err := s.writeMessages(ctx, func(w *writer) error {
		var err error
		created, err = importFile(w, src, runs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src.Path, err)
	}
	return created, nil
}

// ImportFiles stores n files as ImportFile does, in one transaction with a
// savepoint per file: each file is still all or nothing (one that fails is
// rolled back to its savepoint and reported through done, the others
// stay), but the batch costs one commit. file(i) gives the i-th file; done
// is called for each, in order, once it is stored or failed. A failure of
// the transaction itself (its commit, a savepoint), or a file's error that
// fatal says is the database's own, is returned, and then nothing of the
// batch is stored: done is called only after the commit.
func (s *Store) ImportFiles(ctx context.Context, n int, file func(i int) (model.Source, []model.FileRun),
	done func(i int, created []model.Run, err error), fatal func(i int, err error) bool) error {
	// Files rarely fail: the batch is written first without savepoints
	// (a savepoint journals every page it changes again). Should a file
	// fail, that attempt is rolled back whole and the batch written again
	// with a savepoint per file.
	results, errs, err := s.importFiles(ctx, n, file, fatal, false)
	if errors.Is(err, errFileFailed) {
		results, errs, err = s.importFiles(ctx, n, file, fatal, true)
	}
	if err != nil {
		return err
	}
	for i := range n {
		if errs[i] != nil {
			done(i, nil, errs[i])
		} else {
			done(i, results[i], nil)
		}
	}
	return nil
}

// errFileFailed ends a batch written without savepoints when a file fails.
var errFileFailed = errors.New("a file of the batch failed")

func (s *Store) importFiles(ctx context.Context, n int, file func(i int) (model.Source, []model.FileRun),
	fatal func(i int, err error) bool, savepoints bool) ([][]model.Run, []error, error) {
	results := make([][]model.Run, n)
	errs := make([]error, n)
	err := s.writeMessages(ctx, func(w *writer) error {
		exec := func(q string) error {
			st, err := w.stmt(q)
			if err == nil {
				_, err = st.ExecContext(w.ctx)
			}
			return err
		}
		for i := range n {
			// Statements run without the caller's context (writer.ctx):
			// a cancelled import stops here, between files.
			if err := ctx.Err(); err != nil {
				return err
			}
			src, runs := file(i)
			if savepoints {
				if err := exec(`SAVEPOINT import_file`); err != nil {
					return err
				}
			}
			created, err := importFile(w, src, runs)
			if err == nil && savepoints {
				// Each file's text is indexed inside its savepoint.
				err = w.indexText()
			}
			if err != nil {
				w.text, w.textBytes = w.text[:0], 0
				errs[i] = fmt.Errorf("import %s: %w", src.Path, err)
				if fatal != nil && fatal(i, errs[i]) {
					return errs[i] // the database itself fails: write nothing more
				}
				if !savepoints {
					return errFileFailed
				}
				if rerr := exec(`ROLLBACK TO import_file`); rerr != nil {
					return rerr
				}
			}
			if savepoints {
				if err := exec(`RELEASE import_file`); err != nil {
					return err
				}
			}
			results[i] = created
		}
		return nil
	})
	return results, errs, err
}

// importFile writes one file's runs, its source row and its links in w,
// replacing what the file held before (RetireSource).
func importFile(w *writer, src model.Source, runs []model.FileRun) ([]model.Run, error) {
	created := make([]model.Run, len(runs))
	err := func() error {
		if err := retire(w, src.Path); err != nil {
			return err
		}
		for i, fr := range runs {
			r := fr.Run
			r.Source = src.Path
			if fr.Parent >= 0 {
				if fr.Parent >= i {
					return fmt.Errorf("run %d of %s branches from run %d, which comes later", i, src.Path, fr.Parent)
				}
				r.ParentID = created[fr.Parent].ID
			}
			if fr.Stream != nil {
				if err := createStreamedRun(w, &r, fr.Stream); err != nil {
					return err
				}
			} else if _, err := createRun(w, &r, fr.Messages); err != nil {
				return err
			}
			created[i] = r
			if fr.Link != nil {
				if err := addLink(w.ctx, w.Tx, r.ID, *fr.Link); err != nil {
					return err
				}
			}
		}
		if err := putSource(w, src, firstID(created)); err != nil {
			return err
		}
		if err := replaceRetired(w, src.Path, created); err != nil {
			return err
		}
		return resolveLinks(w, created)
	}()
	if err != nil {
		return nil, err
	}
	return created, nil
}

// streamChunk is how many messages of a streamed run are read and stored
// at a time.
const streamChunk = 1024

// createStreamedRun is createRun for a run whose messages come as a
// stream (a long session's): they are read and stored a chunk at a time,
// in the caller's transaction, so the session is never held whole and a
// failure anywhere leaves none of it. What createRun works out from the
// messages before the run's row (its last activity, its usage when the
// parser gave none) is set once they are all read.
func createStreamedRun(w *writer, run *model.Run, src model.MessageStream) error {
	n := src.Len()
	if err := prepareRun(w, run, n > 0); err != nil {
		return err
	}
	run.OwnMessages = n
	if err := insertRun(w, run, run.CreatedAt); err != nil {
		return err
	}
	last, usage := run.CreatedAt, model.Usage{}
	each := func(chunk func(off int, msgs []model.Message) error) error {
		for off := 0; off < n; off += streamChunk {
			msgs, err := src.Messages(off, min(off+streamChunk, n))
			if err != nil {
				return fmt.Errorf("messages %d to %d: %w", off, min(off+streamChunk, n)-1, err)
			}
			if _, err := insertMessages(w, run.ID, run.ForkAt+off, msgs); err != nil {
				return err
			}
			last = lastActivity(last, msgs)
			usage = usage.Add(model.OwnUsage(msgs, 0))
			if err := chunk(off, msgs); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if run.ParentID == "" {
		// As noteCuts for a new run of its own: fed as the chunks go.
		err = newCuts(w, run.ID, model.NewCutState(0), func(feed func(model.Message)) error {
			return each(func(_ int, msgs []model.Message) error {
				for _, m := range msgs {
					feed(m)
				}
				return nil
			})
		})
	} else {
		err = each(func(off int, msgs []model.Message) error { return noteCuts(w, run.ID, false, off, msgs) })
	}
	if err != nil {
		return err
	}
	if run.Usage.IsZero() && !usage.IsZero() {
		run.Usage = usage
		if _, err := w.ExecContext(w.ctx, `UPDATE runs SET input_tokens = ?, output_tokens = ?, cache_read_tokens = ?,
			cache_write_tokens = ? WHERE id = ?`, usage.InputTokens, usage.OutputTokens, usage.CacheReadTokens,
			usage.CacheWriteTokens, run.ID); err != nil {
			return err
		}
	}
	if last.After(run.CreatedAt) {
		_, err = w.ExecContext(w.ctx, `UPDATE runs SET last_at = max(last_at, ?) WHERE id = ?`, last.UnixNano(), run.ID)
	}
	return err
}

// AppendFile adds the messages read from a grown file's new bytes to the
// run that file is, with the usage they add (usage alone, when the new
// bytes only report it), and records how far the file was read.
func (s *Store) AppendFile(ctx context.Context, src model.Source, runID string, msgs []model.Message, u model.Usage) error {
	err := s.writeMessages(ctx, func(w *writer) error {
		if _, err := appendMessages(w, runID, msgs, u); err != nil {
			return err
		}
		if len(msgs) == 0 && !u.IsZero() {
			if _, err := w.ExecContext(w.ctx, `UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
				cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ? WHERE id = ?`,
				u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, runID); err != nil {
				return err
			}
		}
		return putSource(w, src, runID)
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", src.Path, err)
	}
	return nil
}

// SetImportedEnd records how the run imported from a grown file ends now,
// as the file says: its status, error and (when known) finish time.
func (s *Store) SetImportedEnd(ctx context.Context, runID string, st model.Status, errText string, finished time.Time) error {
	var fin sql.NullInt64
	if !finished.IsZero() {
		fin = nanos(finished)
	}
	return s.update(ctx, "set imported end", runID,
		`UPDATE runs SET status = ?, error = ?, finished_at = coalesce(?, finished_at), last_at = max(last_at, coalesce(?, 0))
		WHERE id = ? AND source != ''`, string(st), errText, fin, fin, runID)
}

// SkipFile records a file that was read and held nothing to store, so it
// is not read again until it changes. What the file held before is
// retired (RetireSource) in the same transaction.
func (s *Store) SkipFile(ctx context.Context, src model.Source, reason string) error {
	return s.writeMessages(ctx, func(w *writer) error {
		if err := retire(w, src.Path); err != nil {
			return err
		}
		_, err := w.ExecContext(w.ctx, `INSERT INTO sources (path, format, size, mtime, "offset", run_id, imported_at, skipped)
			VALUES (?, ?, ?, ?, ?, NULL, ?, ?)
			ON CONFLICT (path) DO UPDATE SET format = excluded.format, size = excluded.size, mtime = excluded.mtime,
				"offset" = excluded."offset", imported_at = excluded.imported_at, skipped = excluded.skipped`,
			src.Path, src.Format, src.Size, src.MTime.UnixNano(), src.Offset, time.Now().UnixNano(), reason)
		return err
	})
}

// RetiredPrefix marks the source of runs whose file was rewritten.
const RetiredPrefix = "retired:"

// RetireSource detaches the runs of a file that is read again (rewritten
// in place, or grown past a branch): they are hidden and marked retired,
// and the file's new content is imported afresh. The subagents they
// spawned wait for the new runs (a pending link). ImportFile then moves the
// forks made from them (tine's, other files') onto the new runs that hold
// the same prefix, and deletes the retired runs nothing needs any more, so
// a file's old tree never shows next to its new one; a retired run that a
// fork still needs stays, hidden, and that fork keeps working.
//
// ImportFile and SkipFile retire what a file held before themselves, in
// their own transaction: an import that fails (a full disk) then leaves
// the old runs as they were, never hidden with nothing to replace them.
func (s *Store) RetireSource(ctx context.Context, path string) error {
	return s.writeMessages(ctx, func(w *writer) error {
		if err := retire(w, path); err != nil {
			return err
		}
		_, err := w.ExecContext(w.ctx, `DELETE FROM sources WHERE path = ?`, path)
		return err
	})
}

// retire is RetireSource in w, without forgetting the file.
func retire(w *writer, path string) error {
	// Most files were never imported before: one look says so. (source !=
	// '' lets SQLite use the index runs_source, which holds only imported
	// runs; else each look reads every run.)
	imported, err := w.stmt(`SELECT EXISTS (SELECT 1 FROM runs WHERE source = ? AND source != '')`)
	if err != nil {
		return err
	}
	var has int
	if err := imported.QueryRowContext(w.ctx, path).Scan(&has); err != nil || has == 0 {
		return err
	}
	ctx, tx := w.ctx, w.Tx
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO links (run_id, kind, harness, parent_session, tool_call)
		SELECT c.id, ?, r.harness, r.native_id, c.spawned_call FROM runs c JOIN runs r ON c.spawned_by = r.id
		WHERE r.source = ? AND r.source != '' AND r.native_id != ''`, string(model.LinkSubagent), path); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE runs SET hidden = 1, source = ? WHERE source = ? AND source != ''`, RetiredPrefix+path, path)
	return err
}

// replaceRetired hands what the retired runs of path carried over to the
// runs just created from the file's new content: each fork made from a
// retired run moves to the first new run whose transcript starts with the
// same messages (by native id) up to the fork's boundary. Then the retired
// runs that nothing forks from are deleted, leaves first.
func replaceRetired(w *writer, path string, created []model.Run) error {
	retired := RetiredPrefix + path
	// Most files were never read before: one look says nothing is retired.
	anyRetired, err := w.stmt(`SELECT EXISTS (SELECT 1 FROM runs WHERE source = ? AND source != '')`)
	if err != nil {
		return err
	}
	var has int
	if err := anyRetired.QueryRowContext(w.ctx, retired).Scan(&has); err != nil {
		return err
	}
	if has == 0 {
		return nil
	}
	// Deleting runs deletes their messages: the index must hold the text
	// of every message first (writer.indexText).
	if err := w.indexText(); err != nil {
		return err
	}
	ctx, tx := w.ctx, w.Tx
	type dep struct {
		id, parent string
		forkAt     int
	}
	rows, err := tx.QueryContext(ctx, `SELECT c.id, c.parent_id, c.fork_at FROM runs c JOIN runs r ON c.parent_id = r.id
		WHERE r.source = ? AND r.source != '' AND c.source != ? ORDER BY c.created_at, c.id`, retired, retired)
	if err != nil {
		return err
	}
	var deps []dep
	for rows.Next() {
		var d dep
		if err := rows.Scan(&d.id, &d.parent, &d.forkAt); err != nil {
			rows.Close()
			return err
		}
		deps = append(deps, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range deps {
		want, err := prefixNatives(ctx, tx, d.parent, d.forkAt)
		if err != nil || len(want) < d.forkAt || slices.Contains(want, "") {
			if err != nil {
				return err
			}
			continue // the prefix cannot be matched: the fork stays where it is
		}
		for _, n := range created {
			have, err := prefixNatives(ctx, tx, n.ID, d.forkAt)
			if err != nil {
				return err
			}
			if !slices.Equal(have, want) {
				continue
			}
			var tree string
			if err := tx.QueryRowContext(ctx, `SELECT tree_id FROM runs WHERE id = ?`, n.ID).Scan(&tree); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET parent_id = ? WHERE id = ?`, n.ID, d.id); err != nil {
				return err
			}
			if err := staleCuts(ctx, tx, d.id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `WITH RECURSIVE sub (id) AS (
					SELECT ? UNION SELECT r.id FROM runs r JOIN sub ON r.parent_id = sub.id)
				UPDATE runs SET tree_id = ? WHERE id IN (SELECT id FROM sub)`, d.id, tree); err != nil {
				return err
			}
			break
		}
	}
	for {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE source = ? AND source != ''
			AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = runs.id)
			AND NOT EXISTS (SELECT 1 FROM runs t WHERE t.tree_id = runs.id AND t.id != runs.id)`, retired)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
	}
}

// prefixNatives is the native ids of run id's first k messages (its
// inherited prefix, then its own), fewer when it is shorter.
func prefixNatives(ctx context.Context, tx *sql.Tx, id string, k int) ([]string, error) {
	chain, err := ancestry(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range chain {
		rows, err := tx.QueryContext(ctx, `SELECT native_id FROM messages WHERE run_id = ? AND seq < ? AND seq < ? ORDER BY seq`, l.id, l.bound, k)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Sources returns every recorded file by path, for a fast re-import scan.
func (s *Store) Sources(ctx context.Context) (map[string]model.Source, error) {
	// On the writer's connection: its callers are importers, which write
	// next, and a re-import of unchanged files then opens no reader (each
	// connection parses the schema again).
	rows, err := s.w.QueryContext(ctx, `SELECT path, format, size, mtime, "offset", leaf FROM sources`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]model.Source{}
	for rows.Next() {
		var src model.Source
		var mtime int64
		if err := rows.Scan(&src.Path, &src.Format, &src.Size, &mtime, &src.Offset, &src.Leaf); err != nil {
			return nil, err
		}
		src.MTime = time.Unix(0, mtime)
		out[src.Path] = src
	}
	return out, rows.Err()
}

// RunsBySource returns the runs imported from a file, oldest first.
func (s *Store) RunsBySource(ctx context.Context, path string) ([]model.Run, error) {
	return s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r WHERE r.source = ? AND r.source != ''
		ORDER BY r.created_at, r.rowid`, path)
}

// DrivenRun finds the fork tine ran whose agent session is nativeID: its
// messages were stored as they streamed, so the session's file, when it is
// imported, belongs to that fork and is not stored a second time. Two runs
// never hold one conversation id, whichever harness drove it: Claude Code
// behind an ACP agent (claude-agent-acp) keeps its session under the ACP
// session's id, which the ACP run holds, so a file of harness's is that
// fork's too; a fork of harness itself is preferred.
func (s *Store) DrivenRun(ctx context.Context, harness, nativeID string) (model.Run, bool, error) {
	if nativeID == "" {
		return model.Run{}, false, nil
	}
	// Asked for every file an import reads, and nearly always no: a small
	// statement, prepared once, says so (preparing the full row's is most
	// of the cost).
	s.drivenOnce.Do(func() {
		s.drivenStmt, s.drivenErr = s.r.PrepareContext(context.Background(), `SELECT EXISTS (SELECT 1 FROM runs
			WHERE native_id = ? AND source = '' AND parent_id IS NOT NULL)`)
	})
	if s.drivenErr != nil {
		return model.Run{}, false, s.drivenErr
	}
	var has int
	if err := s.drivenStmt.QueryRowContext(ctx, nativeID).Scan(&has); err != nil || has == 0 {
		return model.Run{}, false, err
	}
	runs, err := s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r WHERE r.native_id = ?
		AND r.source = '' AND r.parent_id IS NOT NULL ORDER BY r.harness != ?, r.created_at LIMIT 1`, nativeID, harness)
	if err != nil || len(runs) == 0 {
		return model.Run{}, false, err
	}
	return runs[0], true, nil
}

func firstID(runs []model.Run) sql.NullString {
	if len(runs) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: runs[0].ID, Valid: true}
}

// putSource records a file read.
func putSource(w *writer, src model.Source, runID any) error {
	st, err := w.stmt(`INSERT INTO sources (path, format, size, mtime, "offset", run_id, imported_at, leaf)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (path) DO UPDATE SET format = excluded.format, size = excluded.size, mtime = excluded.mtime,
			"offset" = excluded."offset", run_id = coalesce(excluded.run_id, sources.run_id),
			imported_at = excluded.imported_at, skipped = '', leaf = excluded.leaf`)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(w.ctx, src.Path, src.Format, src.Size, src.MTime.UnixNano(), src.Offset, runID, time.Now().UnixNano(), src.Leaf)
	return err
}

func addLink(ctx context.Context, tx *sql.Tx, runID string, l model.Link) error {
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO links
		(run_id, kind, harness, parent_session, after_message, before_ordinal, inherited, tool_call)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, string(l.Kind), l.Harness, l.ParentSession, l.AfterMessage, l.BeforeOrdinal, l.Inherited, l.ToolCall)
	return err
}

// resolveLinks tries the links of the runs just created, and the pending
// links of other runs that point at them.
func resolveLinks(w *writer, created []model.Run) error {
	waiting, err := w.stmt(`SELECT run_id FROM links WHERE harness = ? AND parent_session = ?`)
	if err != nil {
		return err
	}
	check := map[string]bool{}
	for _, r := range created {
		check[r.ID] = true
		if r.NativeID == "" {
			continue
		}
		rows, err := waiting.QueryContext(w.ctx, r.Harness, r.NativeID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			check[id] = true
		}
		rows.Close()
	}
	for id := range check {
		if err := resolveLink(w, id); err != nil {
			return err
		}
	}
	return nil
}

// resolveLink makes run id's link real when the session it names is stored:
// a fork becomes a fork of that session's run, dropping the copies of the
// prefix it now inherits; a subagent is tied to the run that spawned it.
func resolveLink(w *writer, id string) error {
	ctx, tx := w.ctx, w.Tx
	link, err := w.stmt(`SELECT kind, harness, parent_session, after_message, before_ordinal, inherited, tool_call
		FROM links WHERE run_id = ?`)
	if err != nil {
		return err
	}
	var l model.Link
	var kind string
	err = link.QueryRowContext(ctx, id).Scan(&kind, &l.Harness, &l.ParentSession, &l.AfterMessage, &l.BeforeOrdinal, &l.Inherited, &l.ToolCall)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	l.Kind = model.LinkKind(kind)
	var parent, parentTree string
	var parentLen int
	// The session's own run: the one imported from its file, oldest first.
	err = tx.QueryRowContext(ctx, `SELECT id, tree_id, fork_at + own_messages FROM runs
		WHERE harness = ? AND native_id = ? AND id != ?
		ORDER BY source LIKE 'retired:%', source = '', parent_id IS NOT NULL, created_at LIMIT 1`,
		l.Harness, l.ParentSession, id).Scan(&parent, &parentTree, &parentLen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not imported yet: the link waits
	}
	if err != nil {
		return err
	}
	if l.Kind == model.LinkSubagent {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET spawned_by = ?, spawned_call = ? WHERE id = ?`, parent, l.ToolCall, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM links WHERE run_id = ?`, id)
		return err
	}
	k, ok, err := forkPoint(ctx, tx, parent, l)
	if err != nil || !ok {
		return err // the parent lacks the fork point (yet): wait
	}
	var childParent sql.NullString
	var own int
	if err := tx.QueryRowContext(ctx, `SELECT parent_id, own_messages FROM runs WHERE id = ?`, id).Scan(&childParent, &own); err != nil {
		return err
	}
	if childParent.Valid || l.Inherited > own || k > parentLen {
		_, err = tx.ExecContext(ctx, `DELETE FROM links WHERE run_id = ?`, id)
		return err // already placed, or the link does not fit: leave the run as it is
	}
	// Copies the parser could not recognise (Claude marks copied assistant
	// records only) still carry the parent's native ids: share them too.
	inherited := l.Inherited
	more, err := sameNatives(ctx, tx, parent, k, id, inherited)
	if err != nil {
		return err
	}
	k, inherited = k+more, inherited+more
	if err := reparent(w, id, parent, parentTree, parentLen, k, inherited); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM links WHERE run_id = ?`, id)
	return err
}

// sameNatives counts how many of child's messages from seq from on repeat,
// by native id, parent's own messages from seq k on.
func sameNatives(ctx context.Context, tx *sql.Tx, parent string, k int, child string, from int) (int, error) {
	read := func(run string, start int) ([]string, error) {
		rows, err := tx.QueryContext(ctx, `SELECT native_id FROM messages WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT 1000`, run, start)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	}
	p, err := read(parent, k)
	if err != nil {
		return 0, err
	}
	c, err := read(child, from)
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) && n < len(c)-1 && p[n] != "" && p[n] == c[n] {
		n++ // keep at least one message of the child's own
	}
	return n, nil
}

// forkPoint finds K, how many of parent's messages the fork inherits.
func forkPoint(ctx context.Context, tx *sql.Tx, parent string, l model.Link) (int, bool, error) {
	chain, err := ancestry(ctx, tx, parent)
	if err != nil {
		return 0, false, err
	}
	switch {
	case l.AfterMessage != "":
		for _, lv := range chain {
			var seq int
			err := tx.QueryRowContext(ctx, `SELECT seq FROM messages WHERE run_id = ? AND seq < ? AND native_id = ? ORDER BY seq LIMIT 1`,
				lv.id, lv.bound, l.AfterMessage).Scan(&seq)
			if err == nil {
				return seq + 1, true, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return 0, false, err
			}
		}
		return 0, false, nil
	case l.BeforeOrdinal > 0:
		k := 0
		for _, lv := range chain {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE run_id = ? AND seq < ?
				AND native_id != '' AND CAST(native_id AS INTEGER) < ?`, lv.id, lv.bound, l.BeforeOrdinal).Scan(&n); err != nil {
				return 0, false, err
			}
			k += n
		}
		return k, true, nil
	}
	return 0, false, nil
}

// reparent turns root run child into a fork of parent at k, dropping its
// first inherited own messages (copies of the parent's prefix) and moving
// its tree under the parent's.
func reparent(w *writer, child, parent, parentTree string, parentLen, k, inherited int) error {
	// The child's copies are deleted: their text must be in the index
	// first, for the delete trigger to take it out (writer.indexText).
	if err := w.indexText(); err != nil {
		return err
	}
	// Its transcript, and its forks', change: their cut facts are worked
	// out again when read.
	if err := staleCuts(w.ctx, w.Tx, child); err != nil {
		return err
	}
	steps := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM messages WHERE run_id = ? AND seq < ?`, []any{child, inherited}},
		// Shift seq through negative values so UNIQUE (run_id, seq) holds at every row.
		{`UPDATE messages SET seq = -(seq - ? + ?) - 1 WHERE run_id = ?`, []any{inherited, k, child}},
		{`UPDATE messages SET seq = -seq - 1 WHERE run_id = ? AND seq < 0`, []any{child}},
		// The child's own forks: those made past the copies shift with it;
		// those inside the copies now branch from the parent itself.
		{`UPDATE runs SET parent_id = ? WHERE parent_id = ? AND fork_at < ?`, []any{parent, child, inherited}},
		{`UPDATE runs SET fork_at = fork_at - ? + ? WHERE parent_id = ? AND fork_at >= ?`, []any{inherited, k, child, inherited}},
		{`UPDATE runs SET parent_id = ?, tree_id = ?, fork_at = ?, parent_len = ?, own_messages = own_messages - ? WHERE id = ?`,
			[]any{parent, parentTree, k, parentLen, inherited, child}},
		{`UPDATE runs SET tree_id = ? WHERE tree_id = ?`, []any{parentTree, child}},
	}
	for _, s := range steps {
		if _, err := w.ExecContext(w.ctx, s.q, s.args...); err != nil {
			return fmt.Errorf("link %s under %s: %w", child, parent, err)
		}
	}
	return nil
}

// Spawned returns the subagent runs started by the given runs, and theirs,
// with the forks made from them.
func (s *Store) Spawned(ctx context.Context, runIDs []string) ([]model.Run, error) {
	var out []model.Run
	seen := map[string]bool{}
	for len(runIDs) > 0 {
		var next []string
		for _, id := range runIDs {
			subs, err := s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r WHERE r.spawned_by = ?
				OR r.tree_id IN (SELECT id FROM runs WHERE spawned_by = ?) ORDER BY r.created_at`, id, id)
			if err != nil {
				return nil, err
			}
			for _, r := range subs {
				if !seen[r.ID] {
					seen[r.ID] = true
					out = append(out, r)
					next = append(next, r.ID)
				}
			}
		}
		runIDs = next
	}
	return out, nil
}
