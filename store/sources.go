package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"tine/model"
)

// Source is a transcript file that was imported: enough to tell on the next
// import whether it changed.
type Source struct {
	Path   string
	Format string
	Size   int64
	MTime  time.Time
	// Offset is how many bytes were read; a grown file resumes there.
	Offset     int64
	RunID      string
	ImportedAt time.Time
}

// Source returns what is known of the file at path; ok is false when it
// was never imported.
func (s *Store) Source(ctx context.Context, path string) (src Source, ok bool, err error) {
	var mtime, imported int64
	var run sql.NullString
	err = s.r.QueryRowContext(ctx, `SELECT path, format, size, mtime, "offset", run_id, imported_at
		FROM sources WHERE path = ?`, path).Scan(&src.Path, &src.Format, &src.Size, &mtime, &src.Offset, &run, &imported)
	if errors.Is(err, sql.ErrNoRows) {
		return Source{}, false, nil
	}
	if err != nil {
		return Source{}, false, fmt.Errorf("source %s: %w", path, err)
	}
	src.MTime, src.ImportedAt, src.RunID = time.Unix(0, mtime), time.Unix(0, imported), run.String
	return src, true, nil
}

// ImportRun stores a run read from a file and records the file, in one
// transaction: a crash leaves neither or both.
func (s *Store) ImportRun(ctx context.Context, src Source, r *model.Run, msgs []model.Message) error {
	run := *r
	var ids []int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if ids, err = createRun(ctx, tx, &run, msgs); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sources (path, format, size, mtime, "offset", run_id, imported_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (path) DO UPDATE SET format = excluded.format, size = excluded.size, mtime = excluded.mtime,
				"offset" = excluded."offset", run_id = excluded.run_id, imported_at = excluded.imported_at, skipped = ''`,
			src.Path, src.Format, src.Size, src.MTime.UnixNano(), src.Offset, run.ID, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", src.Path, err)
	}
	*r = run
	for i := range msgs {
		msgs[i].ID = ids[i]
	}
	return nil
}
