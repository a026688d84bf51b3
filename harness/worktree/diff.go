package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileStat is one file a fork changed.
type FileStat struct {
	Path           string // path from the top of the worktree
	From           string // the old path when git saw a rename, else ""
	Added, Deleted int    // lines; 0 for binary files
	Binary         bool
}

// DiffStat is what a fork changed against base in its worktree at dir:
// committed, staged, unstaged and untracked files alike (untracked files
// count as added lines), like `git diff --stat base` plus untracked files.
// An empty base means HEAD.
func DiffStat(ctx context.Context, dir, base string) ([]FileStat, error) {
	out, err := diffAgainst(ctx, dir, base, "--numstat", "-z")
	if err != nil {
		return nil, err
	}
	return parseNumstat(out)
}

// Diff is the whole unified diff of the worktree at dir against base,
// untracked files included as new files. Binary files show as "Binary files
// differ". An empty base means HEAD.
func Diff(ctx context.Context, dir, base string) (string, error) {
	out, err := diffAgainst(ctx, dir, base, "--src-prefix=a/", "--dst-prefix=b/")
	return string(out), err
}

// Carried reports whether a fork's worktree at dir started with other files
// than its base commit's: start (the git tree it started with) holds the
// uncommitted and untracked work of its checkout, carried over. An empty
// start or base is none carried.
func Carried(ctx context.Context, dir, base, start string) (bool, error) {
	if start == "" || base == "" {
		return false, nil
	}
	tree, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", base+"^{tree}")
	if err != nil {
		return false, repoErr(dir, err)
	}
	return tree != start, nil
}

// Uncommitted counts the files of dir's checkout that differ from its HEAD
// (staged, unstaged and untracked, not ignored): what a fork made from it
// starts with on top of HEAD (Create carries them over).
func Uncommitted(ctx context.Context, dir string) (int, error) {
	if err := checkDir(dir); err != nil {
		return 0, err
	}
	out, err := cmd{dir: dir}.run(ctx, "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all")
	if err != nil {
		return 0, repoErr(dir, err)
	}
	return strings.Count(string(out), "\x00"), nil
}

// topAndIndex are the top of dir's work tree and its index file.
func topAndIndex(ctx context.Context, dir string) (top, index string, err error) {
	out, err := git(ctx, dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-path", "index")
	if err != nil {
		return "", "", repoErr(dir, err)
	}
	top, index, ok := strings.Cut(out, "\n")
	if !ok {
		return "", "", fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	return top, index, nil
}

// diffAgainst runs `git diff base` at the top of dir's worktree against a
// copy of its index in which untracked files are marked intent-to-add: git
// then diffs them as new files, reading them from disk without writing
// objects, and the worktree's real index (which the agent in it may be
// using) is never touched.
func diffAgainst(ctx context.Context, dir, base string, args ...string) ([]byte, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	if base == "" {
		base = "HEAD"
	}
	top, index, err := topAndIndex(ctx, dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "tine-worktree-")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := filepath.Join(tmp, "index")
	if err := copyIndex(index, idx); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	c := cmd{dir: top, env: []string{"GIT_INDEX_FILE=" + idx}}
	// -N with -A marks only untracked, not ignored, files; tracked ones keep
	// their entries.
	if _, err := c.run(ctx, "add", "-A", "-N"); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	// Fixed options so the user's diff config (external tools, colour, no
	// prefixes, relative paths) cannot change what we parse or show.
	diff := append([]string{"diff", "--no-ext-diff", "--no-color", "-M"}, args...)
	diff = append(diff, base, "--")
	out2, err := c.run(ctx, diff...)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return out2, nil
}

// parseNumstat reads `git diff --numstat -z`: "added\tdeleted\tpath\0", or
// for a rename "added\tdeleted\t\0from\0to\0"; "-" counts mean binary.
func parseNumstat(out []byte) ([]FileStat, error) {
	var stats []FileStat
	f := strings.Split(string(out), "\x00")
	for i := 0; i < len(f); i++ {
		if f[i] == "" {
			continue
		}
		parts := strings.SplitN(f[i], "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("worktree: unexpected numstat record %q", f[i])
		}
		var st FileStat
		if parts[0] == "-" && parts[1] == "-" {
			st.Binary = true
		} else {
			a, err1 := strconv.Atoi(parts[0])
			d, err2 := strconv.Atoi(parts[1])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("worktree: unexpected numstat record %q: %w", f[i], err)
			}
			st.Added, st.Deleted = a, d
		}
		st.Path = parts[2]
		if st.Path == "" { // rename: the two paths follow
			if i+2 >= len(f) {
				return nil, fmt.Errorf("worktree: truncated numstat rename record")
			}
			st.From, st.Path = f[i+1], f[i+2]
			i += 2
		}
		stats = append(stats, st)
	}
	return stats, nil
}
