package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// RunRef is how a command line can name a run: its id or its name, with
// its title and harness to tell runs apart.
type RunRef struct {
	ID, Name, Title, Harness string
	Hidden                   bool
}

// RunRefs lists the runs whose id or name starts with prefix, newest
// activity first, at most limit of them. It reads the database at path
// read-only (SQLite's mode=ro): it never makes, migrates or writes it, nor
// reaps a fork whose process died, as Open does; shell completion asks on
// every Tab, perhaps while another tine writes. No file at path is no runs.
func RunRefs(ctx context.Context, path, prefix string, limit int) ([]RunRef, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	db, err := openRefs(abs)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	defer db.Close()
	// A fork's title is its tree's: the root's.
	rows, err := db.QueryContext(ctx, `SELECT r.id, r.name, coalesce(nullif(r.title, ''), t.title, ''), r.harness, r.hidden
		FROM runs r LEFT JOIN runs t ON t.id = r.tree_id
		WHERE substr(r.id, 1, length(?1)) = ?1 OR substr(r.name, 1, length(?1)) = ?1
		ORDER BY r.last_at DESC, r.id LIMIT ?2`, prefix, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var refs []RunRef
	for rows.Next() {
		var r RunRef
		if err := rows.Scan(&r.ID, &r.Name, &r.Title, &r.Harness, &r.Hidden); err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, rows.Err()
}

// openRefs opens the database at abs for reading only: SQLite opens
// the file read-only (mode=ro), so no pragma can make the connection
// write, and a missing file is an error, not a new database.
func openRefs(abs string) (*sql.DB, error) {
	return sql.Open("sqlite", dsn(abs, true)+"&mode=ro")
}
