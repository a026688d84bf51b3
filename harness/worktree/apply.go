package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Patch is a fork's work in its worktree at dir since base (its commits,
// staged, unstaged and untracked files, as Diff shows them) as a patch
// git apply takes, binary files included, with the files it touches.
func Patch(ctx context.Context, dir, base string) ([]byte, []FileStat, error) {
	files, err := DiffStat(ctx, dir, base)
	if err != nil {
		return nil, nil, err
	}
	patch, err := diffAgainst(ctx, dir, base, "--binary", "--full-index", "--src-prefix=a/", "--dst-prefix=b/")
	if err != nil {
		return nil, nil, err
	}
	return patch, files, nil
}

// ErrApply is wrapped by every refusal of Apply: nothing was changed.
var ErrApply = errors.New("not applied")

// Apply brings patch, touching files, into the checkout at dir: as
// uncommitted changes, or, when commitMsg is set, as one commit with that
// message. It changes nothing, and says why, when the checkout has
// uncommitted changes to a file the patch touches (a file that is as it
// was in start, the tree the fork started from, is no clash: those are
// the changes the fork carried), when (to commit) it has anything staged
// or git knows no committer, or when the patch does not apply cleanly
// (naming the files), or when the checkout holds the patch's changes
// already (applied before). It returns the commit it made ("" for none).
func Apply(ctx context.Context, dir, start string, patch []byte, files []FileStat, commitMsg string) (string, error) {
	if len(files) == 0 || len(bytes.TrimSpace(patch)) == 0 {
		return "", fmt.Errorf("%w: the fork changed no file", ErrApply)
	}
	top, _, err := topAndIndex(ctx, dir)
	if err != nil {
		return "", err
	}
	// A fork applied before: the checkout holds its changes (undoing them
	// would apply), which is no clash of the checkout's own to report.
	if _, err := (cmd{dir: top, stdin: bytes.NewReader(patch)}).run(ctx, "apply", "--whitespace=nowarn", "--reverse", "--check"); err == nil {
		return "", fmt.Errorf("%w: it is applied already: the checkout %s holds its changes (%s)", ErrApply, top, plural(len(files), "file"))
	}
	status, err := cmd{dir: top}.run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	touched := map[string]bool{}
	for _, f := range files {
		touched[f.Path] = true
		if f.From != "" {
			touched[f.From] = true
		}
	}
	var clash []string
	staged := false
	for _, e := range strings.Split(string(status), "\x00") {
		if len(e) < 4 {
			continue
		}
		if e[0] != ' ' && e[0] != '?' {
			staged = true
		}
		if p := e[3:]; touched[p] && !asStarted(ctx, top, start, p) {
			clash = append(clash, p)
		}
	}
	if len(clash) > 0 {
		slices.Sort(clash)
		return "", fmt.Errorf("%w: the checkout %s has uncommitted changes to %s, which the fork changes too: commit or stash them first", ErrApply, top, strings.Join(clash, ", "))
	}
	if commitMsg != "" {
		if staged {
			return "", fmt.Errorf("%w: the checkout %s has staged changes, which a commit would take in: commit or unstage them first (or apply without --commit)", ErrApply, top)
		}
		if _, err := git(ctx, top, "var", "GIT_COMMITTER_IDENT"); err != nil {
			return "", fmt.Errorf("%w: git knows no committer in %s (set user.name and user.email)", ErrApply, top)
		}
	}
	args := []string{"apply", "--whitespace=nowarn"}
	if commitMsg != "" {
		args = append(args, "--index")
	}
	if _, err := (cmd{dir: top, stdin: bytes.NewReader(patch)}).run(ctx, append(append([]string{}, args...), "--check")...); err != nil {
		return "", fmt.Errorf("%w: the fork's changes do not apply cleanly to %s (%s)", ErrApply, top, clashing(err))
	}
	if _, err := (cmd{dir: top, stdin: bytes.NewReader(patch)}).run(ctx, args...); err != nil {
		return "", fmt.Errorf("worktree: applying to %s: %w", top, err)
	}
	if commitMsg == "" {
		return "", nil
	}
	if _, err := (cmd{dir: top}).run(ctx, "commit", "-q", "--no-verify", "-m", commitMsg); err != nil {
		return "", fmt.Errorf("worktree: the changes are applied and staged in %s, but the commit failed: %w", top, err)
	}
	return git(ctx, top, "rev-parse", "HEAD")
}

// asStarted reports whether file p of the checkout at top is as it was in
// the tree start (both missing counts): the fork began from it, so its
// patch applies to it.
func asStarted(ctx context.Context, top, start, p string) bool {
	if start == "" {
		return false
	}
	was, werr := git(ctx, top, "rev-parse", "--verify", "-q", start+":"+p)
	now, nerr := git(ctx, top, "hash-object", "--", p)
	switch {
	case werr != nil && nerr != nil:
		return true // missing in both
	case werr != nil || nerr != nil:
		return false
	}
	return was == now
}

// clashing names the files git apply --check refused, from its stderr.
func clashing(err error) string {
	var ge *gitError
	if !errors.As(err, &ge) {
		return err.Error()
	}
	var files []string
	for _, l := range strings.Split(ge.Stderr, "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "error: ")
		var f string
		switch {
		case strings.HasPrefix(l, "patch failed: "):
			f, _, _ = strings.Cut(strings.TrimPrefix(l, "patch failed: "), ":")
		case strings.HasSuffix(l, ": patch does not apply"):
			f = strings.TrimSuffix(l, ": patch does not apply")
		case strings.HasSuffix(l, ": already exists in working directory"):
			f = strings.TrimSuffix(l, ": already exists in working directory") + " (exists already)"
		case strings.HasSuffix(l, ": does not exist in working tree"), strings.HasSuffix(l, ": No such file or directory"):
			f, _, _ = strings.Cut(l, ":")
			f += " (missing)"
		}
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return strings.TrimSpace(ge.Stderr)
	}
	return "they clash in " + strings.Join(files, ", ")
}
