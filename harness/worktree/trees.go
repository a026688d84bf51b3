package worktree

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// A replay takes the tree of its worktree after every step (Trees). git
// does it with two processes (a copy of the index, `git add -A`, `git
// write-tree`: 10 to 20 ms on a small repository, a third of a second on
// 10,000 files). snapshots does it in Go from the tree before: it keeps
// every file's stat data, as the index does, walks the work tree (one
// stat a file), hashes only the files whose stat data changed (and those
// modified too close to when they were read to be trusted: git's "racy"
// files), writes their blobs and the trees that changed as loose objects,
// and asks git only whether the new paths are ignored (one `git
// check-ignore --stdin` kept running between snapshots: ignore.go). What it cannot reproduce exactly goes to
// git, which also seeds it: filters and attributes (any .gitattributes,
// core.autocrlf), submodules and nested repositories, a changed ignore
// rule (a .gitignore, info/exclude, core.excludesFile), a changed index
// (the agent ran `git add` or `git commit`) or config, special files, an
// index git keeps in a way this does not read (split, sparse,
// skip-worktree), SHA-256 repositories, and on a case-insensitive or
// Unicode-folding file system (macOS) a new path that could be another's.
// Each seed checks that the trees built here from git's index are git's;
// when they are not, git takes the next snapshot too (and checks again).
type snapshots struct {
	mu                 sync.Mutex
	top, index, gitDir string
	common             string
	obj                objects

	// fast: the Go walk may be used (the config and attribute files
	// allow it); root: the tree as of the last snapshot (nil: seed first).
	fast    bool
	root    *dirNode
	ignored map[string]bool // new paths git said are ignored
	// tracked are the paths in the real index, and the folders above
	// them: no ignore rule applies to one (recreated after a delete).
	tracked map[string]bool
	// sources are the files whose change makes git take the next snapshot.
	sources    []sourceFile
	ignoreCase bool // core.ignorecase
	precompose bool // core.precomposeunicode
	gen        uint64
	pending    []newPath
	checker    *ignoreChecker // nil until a new path is seen, and after a seed
	// checkerIdle is how long the checker waits for work (checkerIdle).
	checkerIdle time.Duration
	// walks and seeds count the snapshots taken each way (for tests).
	walks, seeds int
}

// racyMargin: a file modified this close before the snapshot that read
// it may have been modified again within its time stamp's granularity
// without its stat data changing, so it is read again next time. File
// times tick with the kernel's coarse clock (a jiffy, 10 ms at most);
// times in whole seconds say a file system that keeps no more (FAT keeps
// two).
func racyMargin(st gitStat) int64 {
	if st.mtimeN == 0 {
		return int64(2 * time.Second)
	}
	return int64(20 * time.Millisecond)
}

type fileEntry struct {
	mode    uint32
	id      oid
	st      gitStat
	checked int64 // when the snapshot that read it started, Unix ns
	gen     uint64
}

type dirNode struct {
	files map[string]*fileEntry
	dirs  map[string]*dirNode
	id    oid
	empty bool
	ok    bool // id is the tree of what it holds
	gen   uint64
}

func newDir() *dirNode {
	return &dirNode{files: map[string]*fileEntry{}, dirs: map[string]*dirNode{}}
}

type newPath struct {
	parent    *dirNode
	name, rel string
	abs       string
	kind      fs.FileMode // fs.ModeDir, 0 (a file), fs.ModeSymlink, or another type
}

type sourceFile struct {
	path   string
	st     gitStat
	exists bool
}

// errNeedGit: this snapshot is git's to take.
var errNeedGit = errors.New("worktree: the snapshot needs git")

func newSnapshots(ctx context.Context, top, index, gitDir string) (*snapshots, error) {
	objDir, err := git(ctx, top, "--git-dir="+gitDir, "rev-parse", "--path-format=absolute", "--git-path", "objects", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	o, common, _ := strings.Cut(objDir, "\n")
	s := &snapshots{top: top, index: index, gitDir: gitDir, common: common, obj: objects{dir: o, have: map[oid]bool{}, dirs: map[string]bool{}}}
	return s, nil
}

// tree is the snapshot now.
func (s *snapshots) tree(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fast && s.root != nil && s.sourcesUnchanged() {
		t, err := s.walkTree(ctx)
		if !errors.Is(err, errNeedGit) {
			s.walks++
			return t, err
		}
	}
	return s.gitTree(ctx)
}

// gitTree takes the snapshot with git and seeds the next ones from the
// index it wrote.
func (s *snapshots) gitTree(ctx context.Context) (string, error) {
	start := time.Now()
	s.seeds++
	s.root = nil
	if s.checker != nil {
		s.checker.stop() // it read the rules as they were
		s.checker = nil
	}
	if err := s.readConfig(ctx); err != nil {
		return "", err
	}
	var entries []indexEntry
	var parseErr error
	t, err := gitSnapshot(ctx, s.top, s.index, s.gitDir, func(idx string) {
		if !s.fast {
			return
		}
		b, err := os.ReadFile(idx)
		if err == nil {
			entries, err = parseIndex(b)
		}
		parseErr = err
	})
	if err != nil || !s.fast || parseErr != nil {
		return t, err
	}
	s.tracked = map[string]bool{}
	if b, err := os.ReadFile(s.index); err == nil {
		real, err := parseIndex(b)
		if err != nil {
			s.fast = false
			return t, nil
		}
		for _, e := range real {
			s.tracked[e.path] = true
			for dir, _ := path.Split(e.path); dir != ""; dir, _ = path.Split(dir) {
				dir = strings.TrimSuffix(dir, "/")
				if s.tracked[dir] {
					break
				}
				s.tracked[dir] = true
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.fast = false
		return t, nil
	}
	root := newDir()
	for _, e := range entries {
		if path.Base(e.path) == ".gitattributes" {
			return t, nil // filters: git's, every time
		}
		d := root
		dir, name := path.Split(e.path)
		for part := range strings.SplitSeq(strings.TrimSuffix(dir, "/"), "/") {
			if part == "" {
				continue
			}
			sub := d.dirs[part]
			if sub == nil {
				sub = newDir()
				d.dirs[part] = sub
			}
			d = sub
		}
		d.files[name] = &fileEntry{mode: e.mode, id: e.oid, st: e.st, checked: start.UnixNano()}
	}
	var trees []oid
	id, _, err := s.treeOf(root, func(id oid, _ []byte) error { trees = append(trees, id); return nil })
	if err != nil || id.String() != t {
		// Not what git wrote: never trust the walk on this tree.
		s.fast = false
		return t, nil
	}
	for _, id := range trees {
		s.obj.have[id] = true
	}
	s.root = root
	s.ignored = map[string]bool{} // the rules may have changed
	return t, nil
}

var path = pathpkg{}

// pathpkg is path's Base and Split on slash-separated paths (the index's).
type pathpkg struct{}

func (pathpkg) Base(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func (pathpkg) Split(p string) (dir, file string) {
	i := strings.LastIndexByte(p, '/')
	return p[:i+1], p[i+1:]
}

// readConfig reads what decides whether the Go walk is exact here, and
// notes the files whose change would change that.
func (s *snapshots) readConfig(ctx context.Context) error {
	c := cmd{dir: s.top, env: []string{"GIT_DIR=" + s.gitDir, "GIT_WORK_TREE=" + s.top}}
	out, err := c.run(ctx, "config", "-z", "--list", "--show-origin")
	if err != nil && exitCode(err) != 1 {
		return fmt.Errorf("worktree: %w", err)
	}
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	files := []string{s.index, filepath.Join(s.common, "config"), filepath.Join(s.gitDir, "config.worktree"),
		filepath.Join(s.common, "info", "exclude"), filepath.Join(s.common, "info", "attributes")}
	if home != "" {
		files = append(files, filepath.Join(home, ".gitconfig"))
	}
	if xdg != "" {
		files = append(files, filepath.Join(xdg, "git", "config"), filepath.Join(xdg, "git", "ignore"))
	}
	cfg := map[string]string{}
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		// origin NUL key LF value NUL, as records of two.
		if o, ok := strings.CutPrefix(string(rec), "file:"); ok && !strings.Contains(o, "\n") {
			if !filepath.IsAbs(o) {
				o = filepath.Join(s.top, o)
			}
			files = append(files, o)
			continue
		}
		k, v, _ := strings.Cut(string(rec), "\n")
		cfg[strings.ToLower(k)] = v
	}
	on := func(k string, def bool) bool {
		v, ok := cfg[k]
		if !ok {
			return def
		}
		switch strings.ToLower(v) {
		case "true", "yes", "on", "1", "":
			return true
		}
		return false
	}
	attrs := cfg["core.attributesfile"]
	if attrs == "" && xdg != "" {
		attrs = filepath.Join(xdg, "git", "attributes")
	}
	if ex := cfg["core.excludesfile"]; ex != "" {
		files = append(files, expandHome(ex, home))
	}
	s.fast = cfg["extensions.objectformat"] == "" && !on("core.autocrlf", false) && cfg["core.autocrlf"] != "input" &&
		on("core.filemode", true) && on("core.symlinks", true) && !on("core.sparsecheckout", false) &&
		!on("core.splitindex", false) && !on("index.sparse", false) && cfg["core.fsmonitor"] == ""
	if s.fast {
		for _, a := range []string{expandHome(attrs, home), filepath.Join(s.common, "info", "attributes"),
			"/etc/gitattributes", "/usr/etc/gitattributes", "/usr/local/etc/gitattributes", "/opt/homebrew/etc/gitattributes"} {
			if _, err := os.Lstat(a); a != "" && err == nil {
				s.fast = false // attributes may set filters: git's
			}
		}
	}
	s.ignoreCase, s.precompose = on("core.ignorecase", false), on("core.precomposeunicode", false)
	slices.Sort(files)
	s.sources = s.sources[:0]
	for _, f := range slices.Compact(files) {
		sf := sourceFile{path: f}
		if info, err := os.Stat(f); err == nil {
			sf.st, sf.exists = statOf(info), true
		}
		s.sources = append(s.sources, sf)
	}
	return nil
}

func expandHome(p, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		return filepath.Join(home, rest)
	}
	return p
}

// sourcesUnchanged: the index, the config and the ignore files are as the
// last seed found them.
func (s *snapshots) sourcesUnchanged() bool {
	for _, f := range s.sources {
		info, err := os.Stat(f.path)
		if (err == nil) != f.exists || (err == nil && statOf(info) != f.st) {
			return false
		}
	}
	return true
}

// walkTree takes the snapshot in Go.
func (s *snapshots) walkTree(ctx context.Context) (string, error) {
	now := time.Now().UnixNano()
	s.gen++
	s.pending = s.pending[:0]
	if err := s.walk(s.root, s.top, "", now); err != nil {
		return "", err
	}
	for len(s.pending) > 0 {
		if err := s.addNew(ctx, now); err != nil {
			return "", err
		}
	}
	id, _, err := s.treeOf(s.root, func(id oid, body []byte) error { return s.obj.write(id, "tree", body) })
	if err != nil {
		return "", fmt.Errorf("worktree: the tree of %s: %w", s.top, err)
	}
	return id.String(), nil
}

// walk compares the folder abs (rel from the top) with d: files whose
// stat data changed are hashed again, new paths are noted (s.pending),
// and what is gone is dropped.
func (s *snapshots) walk(d *dirNode, abs, rel string, now int64) error {
	d.gen = s.gen
	dir, err := os.Open(abs)
	if err != nil {
		return errNeedGit // gone meanwhile, or unreadable: git says what
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return errNeedGit
	}
	fd := int(dir.Fd())
	for _, name := range names {
		if name == ".git" {
			if rel == "" {
				continue
			}
			return errNeedGit // a nested repository or submodule
		}
		st, kind, err := fstatat(fd, name)
		if err != nil {
			return errNeedGit // gone meanwhile
		}
		switch kind {
		case fs.ModeDir:
			if sub := d.dirs[name]; sub != nil {
				if err := s.walk(sub, filepath.Join(abs, name), join(rel, name), now); err != nil {
					return err
				}
				continue
			}
		case 0, fs.ModeSymlink:
			if f := d.files[name]; f != nil {
				f.gen = s.gen
				if st == f.st && st.mtime() < f.checked-racyMargin(st) {
					continue
				}
				id, err := s.hash(filepath.Join(abs, name), st.mode)
				if err != nil {
					return err
				}
				if st.mode != f.mode || id != f.id {
					if name == ".gitignore" {
						return errNeedGit
					}
					d.ok = false
				}
				f.mode, f.id, f.st, f.checked = st.mode, id, st, now
				continue
			}
		default:
			if d.files[name] != nil || d.dirs[name] != nil {
				return errNeedGit // what was a file or folder is a pipe, a socket, a device
			}
		}
		p := join(rel, name)
		if s.ignored[p] {
			continue
		}
		s.pending = append(s.pending, newPath{parent: d, name: name, rel: p, abs: filepath.Join(abs, name), kind: kind})
	}
	for name, f := range d.files {
		if f.gen != s.gen {
			if name == ".gitignore" {
				return errNeedGit
			}
			delete(d.files, name)
			d.ok = false
		}
	}
	for name, sub := range d.dirs {
		if sub.gen != s.gen {
			if holdsIgnoreRules(sub) {
				return errNeedGit
			}
			delete(d.dirs, name)
			d.ok = false
		}
	}
	return nil
}

func holdsIgnoreRules(d *dirNode) bool {
	if d.files[".gitignore"] != nil {
		return true
	}
	for _, sub := range d.dirs {
		if holdsIgnoreRules(sub) {
			return true
		}
	}
	return false
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// addNew asks git which of the new paths are ignored (one process for
// all), adds the others, and notes what the new folders hold for the
// next round.
func (s *snapshots) addNew(ctx context.Context, now int64) error {
	todo := s.pending
	s.pending = nil
	paths := make([]string, len(todo))
	for i, p := range todo {
		if strings.HasPrefix(p.rel, ":") {
			return errNeedGit // pathspec magic to check-ignore, which reads no literal path
		}
		paths[i] = p.rel
	}
	var ignored map[string]bool
	for {
		if s.checker == nil {
			c, err := startChecker(s.top, s.gitDir, cmp.Or(s.checkerIdle, checkerIdle))
			if err != nil {
				return fmt.Errorf("worktree: %w", err)
			}
			s.checker = c
		}
		var err error
		ignored, err = s.checker.ignored(ctx, paths)
		if errors.Is(err, errCheckerEnded) {
			s.checker = nil // idle too long: started again
			continue
		}
		if err != nil {
			s.checker = nil
			if ctx.Err() != nil {
				return err
			}
			return errNeedGit // git says what went wrong
		}
		break
	}
	for _, p := range todo {
		if p.name == ".gitignore" || p.name == ".gitattributes" {
			return errNeedGit // new rules
		}
		if ignored[p.rel] && !s.tracked[p.rel] {
			s.ignored[p.rel] = true
			continue
		}
		if s.precompose && !isASCII(p.name) || s.ignoreCase && collides(p.parent, p.name) {
			return errNeedGit // it may be another path in other letters
		}
		switch p.kind {
		case fs.ModeDir:
			d := newDir()
			d.gen = s.gen
			p.parent.dirs[p.name] = d
			p.parent.ok = false
			dir, err := os.Open(p.abs)
			if err != nil {
				return errNeedGit
			}
			names, err := dir.Readdirnames(-1)
			if err != nil {
				dir.Close()
				return errNeedGit
			}
			fd := int(dir.Fd())
			for _, name := range names {
				if name == ".git" {
					dir.Close()
					return errNeedGit // a repository inside: git adds it as a submodule
				}
				_, kind, err := fstatat(fd, name)
				if err != nil {
					dir.Close()
					return errNeedGit
				}
				s.pending = append(s.pending, newPath{parent: d, name: name, rel: p.rel + "/" + name,
					abs: filepath.Join(p.abs, name), kind: kind})
			}
			dir.Close()
		case 0, fs.ModeSymlink:
			info, err := os.Lstat(p.abs)
			if err != nil || info.Mode().Type() != p.kind {
				return errNeedGit
			}
			st := statOf(info)
			id, err := s.hash(p.abs, st.mode)
			if err != nil {
				return err
			}
			p.parent.files[p.name] = &fileEntry{mode: st.mode, id: id, st: st, checked: now, gen: s.gen}
			p.parent.ok = false
		default:
			return errNeedGit // a pipe, a socket, a device: git says what
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func collides(d *dirNode, name string) bool {
	for n := range d.files {
		if n != name && strings.EqualFold(n, name) {
			return true
		}
	}
	for n := range d.dirs {
		if n != name && strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// hash writes the blob of the file or symlink at p, of git mode mode.
func (s *snapshots) hash(p string, mode uint32) (oid, error) {
	var body []byte
	var err error
	if mode == 0o120000 {
		var target string
		target, err = os.Readlink(p)
		body = []byte(target)
	} else {
		body, err = os.ReadFile(p)
	}
	if err != nil {
		return oid{}, errNeedGit // gone meanwhile: git says what
	}
	id := hashObject("blob", body)
	if err := s.obj.write(id, "blob", body); err != nil {
		return oid{}, fmt.Errorf("worktree: %w", err)
	}
	return id, nil
}

// gitMode is the mode git records for a file: a symlink, or a regular
// file executable by its owner or not.
func gitMode(info fs.FileInfo) uint32 {
	switch {
	case info.Mode().Type() == fs.ModeSymlink:
		return 0o120000
	case info.Mode()&0o100 != 0:
		return 0o100755
	}
	return 0o100644
}

func (st gitStat) mtime() int64 { return int64(st.mtimeS)*1e9 + int64(st.mtimeN) }

// treeOf is d's tree (empty: it holds no file, so no tree names it),
// computed again where something changed; put stores each new tree.
func (s *snapshots) treeOf(d *dirNode, put func(oid, []byte) error) (oid, bool, error) {
	changed := !d.ok
	type ent struct {
		key, name string
		mode      string
		id        oid
	}
	var subs []ent
	for name, sub := range d.dirs {
		was := sub.id
		wasOK := sub.ok
		id, empty, err := s.treeOf(sub, put)
		if err != nil {
			return oid{}, false, err
		}
		if !wasOK || id != was {
			changed = true
		}
		if !empty {
			subs = append(subs, ent{key: name + "/", name: name, mode: "40000", id: id})
		}
	}
	if !changed {
		return d.id, d.empty, nil
	}
	all := subs
	for name, f := range d.files {
		all = append(all, ent{key: name, name: name, mode: fmt.Sprintf("%o", f.mode), id: f.id})
	}
	slices.SortFunc(all, func(a, b ent) int { return strings.Compare(a.key, b.key) })
	var body bytes.Buffer
	for _, e := range all {
		body.WriteString(e.mode)
		body.WriteByte(' ')
		body.WriteString(e.name)
		body.WriteByte(0)
		body.Write(e.id[:])
	}
	d.empty = len(all) == 0
	d.id = hashObject("tree", body.Bytes())
	d.ok = true
	if !d.empty {
		if err := put(d.id, body.Bytes()); err != nil {
			return oid{}, false, err
		}
	}
	return d.id, d.empty, nil
}

// withKind sets st's git mode from a stat mode and says its kind (as
// fstatat does).
func withKind(st gitStat, mode uint32) (gitStat, fs.FileMode, error) {
	switch mode & 0o170000 {
	case 0o040000:
		return st, fs.ModeDir, nil
	case 0o100000:
		st.mode = 0o100644
		if mode&0o100 != 0 {
			st.mode = 0o100755
		}
		return st, 0, nil
	case 0o120000:
		st.mode = 0o120000
		return st, fs.ModeSymlink, nil
	}
	return st, fs.ModeIrregular, nil
}
