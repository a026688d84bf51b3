package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"tine/harness"
)

// Build is an agent's image to make (tine image build).
type Build struct {
	Agent harness.Agent
	// Tag names it; "" is DefaultImage.
	Tag string
	// Offline assembles it from this machine's installed agent instead
	// of installing the agent's npm package on a Node base image (which
	// needs the base image pulled and npm's registry reached). A build
	// that cannot pull falls back to it, saying so.
	Offline bool
	// Bin is the agent's program on this machine (for Offline).
	Bin string
}

// BaseImage is the image an online build starts from.
const BaseImage = "node:20-bookworm-slim"

// Dockerfile is what an online build of ag runs: the agent's pinned npm
// package and git on a Node base.
func Dockerfile(ag harness.Agent) string {
	pkg := ag.CLI.Package
	if ag.CLI.Pin != "" {
		pkg += "@" + ag.CLI.Pin
	}
	return "FROM " + BaseImage + "\n" +
		"RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates && rm -rf /var/lib/apt/lists/*\n" +
		"RUN npm install -g --no-audit --no-fund " + pkg + "\n" +
		"ENV HOME=/root\nWORKDIR /root\n" +
		"LABEL tine.agent=" + ag.Name + "\n"
}

// BuildImage makes b's image on the place's daemon and checks that the
// agent runs in it (its --version). It returns the image's tag.
func (p *Place) BuildImage(ctx context.Context, b Build, say func(string)) (string, error) {
	if say == nil {
		say = func(string) {}
	}
	if b.Agent.CLI == nil {
		return "", fmt.Errorf("%s has no program of its own to put in an image", b.Agent.Display)
	}
	if b.Tag == "" {
		b.Tag = DefaultImage(b.Agent.Name)
	}
	cli, err := p.client(ctx)
	if err != nil {
		return "", err
	}
	if !b.Offline {
		err := p.buildOnline(ctx, cli, b, say)
		if err == nil {
			return b.Tag, p.smoke(ctx, cli, b)
		}
		if ctx.Err() != nil {
			return "", err
		}
		say(fmt.Sprintf("the online build failed (%s); making the image offline from the %s installed here instead", oneLine(err.Error()), b.Agent.Display))
	}
	if err := p.buildOffline(ctx, cli, b, say); err != nil {
		return "", err
	}
	return b.Tag, p.smoke(ctx, cli, b)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// buildOnline runs Dockerfile through the daemon's builder.
func (p *Place) buildOnline(ctx context.Context, cli *client.Client, b Build, say func(string)) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte(Dockerfile(b.Agent))
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(df); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	say(fmt.Sprintf("building %s from %s with npm's %s", b.Tag, BaseImage, b.Agent.CLI.Package))
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{b.Tag}, Remove: true, ForceRemove: true,
		Labels: map[string]string{labelTine: "1", "tine.agent": b.Agent.Name}})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	return readStream(res.Body)
}

// readStream reads a daemon's progress stream (JSON messages), returning
// the error one of them carries.
func readStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// binDir is where an offline image has its programs.
const binDir = "/usr/local/bin"

// buildOffline assembles a root file system from this machine: the
// agent's npm package and the packages it needs, node, the libraries
// they link, busybox for a shell and its tools, git, and the CA
// certificates; and imports it through the API (nothing is pulled).
func (p *Place) buildOffline(ctx context.Context, cli *client.Client, b Build, say func(string)) error {
	if b.Bin == "" {
		return fmt.Errorf("%s is not installed here, so there is nothing to make its image from: npm install -g %s", b.Agent.Display, b.Agent.CLI.Package)
	}
	fsys, err := collect(b)
	if err != nil {
		return err
	}
	say(fmt.Sprintf("making %s offline: %d files (%s) from this machine", b.Tag, len(fsys.files), bytesText(fsys.size)))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(fsys.write(pw)) }()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, b.Tag, client.ImageImportOptions{
		Changes: []string{
			"ENV PATH=" + binDir + ":/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV HOME=/root",
			"ENV SHELL=/bin/bash",
			"WORKDIR /root",
			"LABEL tine=1",
			"LABEL tine.agent=" + b.Agent.Name,
			`CMD ["/bin/sh"]`,
		},
		Message: "tine image build --offline " + b.Agent.Name,
	})
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("importing %s: %w", b.Tag, err)
	}
	defer res.Close()
	return readStream(res)
}

// smoke runs the agent's --version in the image: an image without the
// agent, or with one that cannot start, is said now, not at a fork's turn.
func (p *Place) smoke(ctx context.Context, cli *client.Client, b Build) error {
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: b.Tag,
		Cmd: []string{b.Agent.CLI.Bin, "--version"}, Env: []string{"HOME=/root"}, Labels: map[string]string{labelTine: "1", labelRole: "smoke"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		return fmt.Errorf("trying %s in %s: %w", b.Agent.CLI.Bin, b.Tag, err)
	}
	defer removeLater(cli, c.ID)
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("%s does not start in %s: %w", b.Agent.CLI.Bin, b.Tag, err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		return err
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%s --version did not answer in %s within 2 minutes", b.Agent.CLI.Bin, b.Tag)
	}
	if code != 0 {
		out := ""
		if logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true}); err == nil {
			var o, e bytes.Buffer
			_, _ = stdcopyLogs(&o, &e, logs)
			out = oneLine(o.String() + " " + e.String())
		}
		return fmt.Errorf("%s --version failed in %s (exit status %d): %s", b.Agent.CLI.Bin, b.Tag, code, out)
	}
	return nil
}

// rootfs is a root file system to import: what goes where.
type rootfs struct {
	files map[string]entry // path in the image (no leading /): what it is
	size  int64
	seen  map[[2]uint64]bool // the files' (device, inode) counted in size
}

type entry struct {
	host string // a file of this machine to copy ("" for a directory or link)
	link string // a symbolic link's target
	dir  bool
	mode fs.FileMode
	// counted: another name of the same file was counted in size.
	counted bool
}

func (r *rootfs) add(name string, e entry) {
	if e.host != "" {
		if fi, err := os.Stat(e.host); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if r.seen[key] {
					e.counted = true
				}
				if r.seen == nil {
					r.seen = map[[2]uint64]bool{}
				}
				r.seen[key] = true
			}
		}
	}
	name = strings.TrimPrefix(filepath.Clean(name), "/")
	if _, ok := r.files[name]; ok {
		return
	}
	for d := filepath.Dir(name); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, ok := r.files[d]; !ok {
			r.files[d] = entry{dir: true, mode: 0o755}
		}
	}
	r.files[name] = e
	if e.host != "" && !e.counted {
		if fi, err := os.Stat(e.host); err == nil {
			r.size += fi.Size()
		}
	}
}

// addFile adds host's file at name, and, when it is a program, the
// libraries it links.
func (r *rootfs) addFile(name, host string) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	r.add(name, entry{host: host, mode: fi.Mode().Perm()})
	return r.addLibs(host)
}

// addLibs adds the shared libraries an ELF file links, as ldd lists them
// on this machine, and its loader.
func (r *rootfs) addLibs(host string) error {
	f, err := elf.Open(host)
	if err != nil {
		return nil // not a program
	}
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC
	}
	f.Close()
	if !dynamic {
		return nil
	}
	out, err := exec.Command("ldd", host).Output()
	if err != nil {
		return nil // a library ldd cannot read is left to fail loudly at run time
	}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		lib := ""
		if _, after, ok := strings.Cut(l, "=> "); ok {
			lib, _, _ = strings.Cut(after, " (")
		} else if strings.HasPrefix(l, "/") {
			lib, _, _ = strings.Cut(l, " (")
		}
		if lib == "" || !filepath.IsAbs(lib) {
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		r.add(lib, entry{host: real, mode: fi.Mode().Perm()})
	}
	return nil
}

// collect gathers what an offline image of b holds.
func collect(b Build) (*rootfs, error) {
	r := &rootfs{files: map[string]entry{}}
	for _, d := range []string{"tmp", "root", "etc", "bin", "usr/bin", "usr/local/bin", "var/tmp"} {
		r.add(d, entry{dir: true, mode: 0o755})
	}
	r.files["tmp"] = entry{dir: true, mode: 0o777 | fs.ModeSticky}
	r.files["var/tmp"] = entry{dir: true, mode: 0o777 | fs.ModeSticky}
	r.files["root"] = entry{dir: true, mode: 0o700}
	// A shell and its tools.
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errors.New("an offline image needs busybox (Debian: apt-get install busybox-static) for a shell and its tools")
	}
	if err := r.addFile("bin/busybox", bb); err != nil {
		return nil, err
	}
	if out, err := exec.Command(bb, "--list").Output(); err == nil {
		for _, app := range strings.Fields(string(out)) {
			if app != "busybox" && regexp.MustCompile(`^[a-z0-9_.\[-]+$`).MatchString(app) {
				r.add("bin/"+app, entry{link: "/bin/busybox"})
			}
		}
	}
	r.add("usr/bin/env", entry{link: "/bin/busybox"})
	// bash: agents run their shell tools in it (Claude Code looks for a
	// POSIX shell it knows, and busybox's is not one).
	if bash, err := exec.LookPath("bash"); err == nil {
		real, _ := filepath.EvalSymlinks(bash)
		delete(r.files, "bin/bash")
		if err := r.addFile("bin/bash", real); err != nil {
			return nil, err
		}
	}
	// node.
	if node, err := exec.LookPath("node"); err == nil {
		real, _ := filepath.EvalSymlinks(node)
		if err := r.addFile(binDir+"/node", real); err != nil {
			return nil, err
		}
	}
	// git and its helpers.
	if err := addGit(r); err != nil {
		return nil, err
	}
	// The agent's package and the packages it needs.
	if err := addAgent(r, b); err != nil {
		return nil, err
	}
	for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/gitconfig"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			r.add(f, entry{host: f, mode: 0o644})
		}
	}
	return r, nil
}

// addGit adds git, the helpers in its exec path and the libraries they
// link (not the remote helpers for https, which link half the system:
// a fork clones nothing).
func addGit(r *rootfs) error {
	g, err := exec.LookPath("git")
	if err != nil {
		return errors.New("an offline image needs git here")
	}
	real, _ := filepath.EvalSymlinks(g)
	if err := r.addFile("usr/bin/git", real); err != nil {
		return err
	}
	out, err := exec.Command(g, "--exec-path").Output()
	if err != nil {
		return nil
	}
	core := strings.TrimSpace(string(out))
	entries, _ := os.ReadDir(core)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "git-remote-http") || strings.HasPrefix(name, "git-http") || strings.HasPrefix(name, "git-imap") {
			continue
		}
		host := filepath.Join(core, name)
		fi, err := os.Stat(host)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if same, _ := filepath.EvalSymlinks(host); same == real {
			r.add(host, entry{link: "/usr/bin/git"})
			continue
		}
		if err := r.addFile(host, host); err != nil {
			return err
		}
	}
	return nil
}

// addAgent adds the agent's npm package, the packages it needs (as node
// finds them from it), and its program on PATH.
func addAgent(r *rootfs, b Build) error {
	real, err := filepath.EvalSymlinks(b.Bin)
	if err != nil {
		return fmt.Errorf("%s: %w", b.Bin, err)
	}
	pkg := packageDir(real)
	if pkg == "" {
		// A program of its own, not from npm.
		return r.addFile(binDir+"/"+b.Agent.CLI.Bin, real)
	}
	modules := filepath.Dir(pkg)
	if strings.HasPrefix(filepath.Base(modules), "@") {
		modules = filepath.Dir(modules)
	}
	const into = "usr/local/lib/node_modules"
	seen := map[string]bool{}
	var walk func(dir string) error
	walk = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		rel, err := filepath.Rel(modules, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil // outside the agent's node_modules: node finds it elsewhere
		}
		if err := addTree(r, dir, filepath.Join(into, rel)); err != nil {
			return err
		}
		for _, dep := range dependencies(dir) {
			if found := resolve(dir, dep, modules); found != "" {
				if err := walk(found); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(pkg); err != nil {
		return err
	}
	rel, err := filepath.Rel(modules, real)
	if err != nil {
		return err
	}
	r.add(binDir+"/"+b.Agent.CLI.Bin, entry{link: "/" + filepath.Join(into, rel)})
	return nil
}

// packageDir is the npm package folder file belongs to: the nearest
// folder above it with a package.json that sits in a node_modules.
func packageDir(file string) string {
	for d := filepath.Dir(file); d != "/" && d != "."; d = filepath.Dir(d) {
		parent := filepath.Dir(d)
		if strings.HasPrefix(filepath.Base(parent), "@") {
			parent = filepath.Dir(parent)
		}
		if _, err := os.Stat(filepath.Join(d, "package.json")); err == nil && filepath.Base(parent) == "node_modules" {
			return d
		}
	}
	return ""
}

// dependencies are what a package's package.json says it needs, optional
// ones too (a native build for this platform is one).
func dependencies(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil
	}
	var pj struct {
		Deps     map[string]string `json:"dependencies"`
		Optional map[string]string `json:"optionalDependencies"`
	}
	_ = json.Unmarshal(b, &pj)
	var out []string
	for d := range pj.Deps {
		out = append(out, d)
	}
	for d := range pj.Optional {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// resolve finds package name as node does from dir: in dir's own
// node_modules, then each one above, up to modules.
func resolve(dir, name, modules string) string {
	for d := dir; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "node_modules", name)
		if filepath.Base(d) == "node_modules" {
			cand = filepath.Join(d, name)
		}
		if fi, err := os.Stat(filepath.Join(cand, "package.json")); err == nil && fi.Mode().IsRegular() {
			return cand
		}
		if d == filepath.Dir(modules) || d == "/" || d == "." {
			return ""
		}
	}
}

// addTree adds the files of host's folder under name, the libraries its
// programs link too.
func addTree(r *rootfs, host, name string) error {
	return filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(host, p)
		to := filepath.Join(name, rel)
		if d.IsDir() {
			if rel != "." && d.Name() == "node_modules" {
				// Its own dependencies are walked as packages.
				r.add(to, entry{dir: true, mode: 0o755})
				return filepath.SkipDir
			}
			r.add(to, entry{dir: true, mode: 0o755})
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err == nil {
				r.add(to, entry{link: target})
			}
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			r.add(to, entry{host: p, mode: fi.Mode().Perm()})
			if fi.Mode()&0o111 != 0 || strings.HasSuffix(p, ".node") {
				_ = r.addLibs(p)
			}
		}
		return nil
	})
}

// write writes the root file system as a tar stream.
func (r *rootfs) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	names := make([]string, 0, len(r.files))
	for n := range r.files {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now()
	// A file linked under several names (a native build and its npm
	// wrapper's copy, git's helpers) is stored once, the rest as links.
	type inode struct{ dev, ino uint64 }
	first := map[inode]string{}
	for _, n := range names {
		e := r.files[n]
		switch {
		case e.dir:
			mode := int64(e.mode.Perm())
			if e.mode&fs.ModeSticky != 0 {
				mode |= 0o1000
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: mode, ModTime: now}); err != nil {
				return err
			}
		case e.link != "":
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: e.link, Mode: 0o777, ModTime: now}); err != nil {
				return err
			}
		default:
			f, err := os.Open(e.host)
			if err != nil {
				return err
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				key := inode{uint64(st.Dev), st.Ino}
				if was, ok := first[key]; ok {
					f.Close()
					if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: n, Linkname: was, Mode: int64(e.mode.Perm()), ModTime: now}); err != nil {
						return err
					}
					continue
				}
				first[key] = n
			}
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: int64(e.mode.Perm()), Size: fi.Size(), ModTime: now})
			if err == nil {
				_, err = io.Copy(tw, f)
			}
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	etc := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname": "tine\n",
	}
	for _, n := range []string{"etc/passwd", "etc/group", "etc/hostname"} {
		if _, ok := r.files[n]; ok {
			continue
		}
		data := etc[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// stdcopyLogs demultiplexes a container's logs.
func stdcopyLogs(o, e io.Writer, r io.ReadCloser) (int64, error) {
	defer r.Close()
	return stdcopy.StdCopy(o, e, r)
}
