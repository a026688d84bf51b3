package acp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errOutside refuses a file request for a path outside the turn's directory.
var errOutside = errors.New("outside the directory this turn works in")

// confine returns path, which must be absolute, when it is inside root once
// symbolic links are resolved (a link inside pointing out is outside). The
// path need not exist: its deepest existing ancestor is what is resolved.
func confine(root, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%q is not an absolute path", path)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	path = filepath.Clean(path)
	// Resolve the longest prefix that exists; the rest is appended as is
	// (it holds no links, since it does not exist yet).
	existing, rest := path, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	real = filepath.Join(real, rest)
	rel, err := filepath.Rel(realRoot, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s: %w (%s)", path, errOutside, root)
	}
	return real, nil
}

// readText reads path inside root, from 1-based line (0: the start), at
// most limit lines (0: all).
func readText(root, path string, line, limit int) (string, error) {
	real, err := confine(root, path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return "", err
	}
	s := string(b)
	if line <= 1 && limit <= 0 {
		return s, nil
	}
	lines := strings.SplitAfter(s, "\n")
	start := max(line-1, 0)
	if start >= len(lines) {
		return "", nil
	}
	end := len(lines)
	if limit > 0 && start+limit < end {
		end = start + limit
	}
	return strings.Join(lines[start:end], ""), nil
}

// writeText writes content to path inside root, making its directories.
func writeText(root, path, content string) error {
	real, err := confine(root, path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(real); err == nil {
		mode = st.Mode().Perm()
	}
	return os.WriteFile(real, []byte(content), mode)
}
