package sandbox

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lanAddr is this machine's first non-loopback IPv4 address, "" when it
// has none.
func lanAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	return ""
}

// listen serves "hi from NAME" on l.
func listen(t *testing.T, l net.Listener, name string) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi from "+name+"\n") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// TestJail: a program in the jail writes its worktree and its TMPDIR and
// nothing else, reaches the gateway through the relay on 127.0.0.1 and
// nothing else (neither the machine's network address nor its loopback),
// sees none of the credentials of its environment but the one it keeps,
// and no process of the machine.
func TestJail(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	root := t.TempDir()
	work, tmp, outside := filepath.Join(root, "work"), filepath.Join(root, "tmp"), filepath.Join(root, "outside")
	for _, d := range []string{work, tmp, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(root, "gw.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	listen(t, ul, "the gateway")
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen(t, hl, "the host's loopback")
	lan := "192.0.2.1:9" // unroutable when the machine has no address
	if ip := lanAddr(); ip != "" {
		ll, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		listen(t, ll, "the network")
		lan = ll.Addr().String()
	}
	get := func(addr string) string {
		host, port, _ := net.SplitHostPort(addr)
		return `exec 3<>/dev/tcp/` + host + `/` + port + ` && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3 | tail -1 || echo "` + addr + `: unreachable"`
	}
	script := strings.Join([]string{
		`echo in > ` + work + `/in.txt && echo "worktree: written"`,
		`echo tmp > "$TMPDIR/t" && echo "tmpdir: written"`,
		`echo out > ` + outside + `/out.txt || echo "outside: refused"`,
		`echo out > /tmp/tine-jail-test-$$ || echo "tmp: refused"`,
		get("127.0.0.1:47123"),
		get(lan),
		get(hl.Addr().String()),
		`n=$(ls /proc | grep -c '^[0-9]'); [ "$n" -lt 10 ] && echo "processes: only the jail's" || echo "processes: $n"`,
		`env`,
	}, "\n")
	s := &Spec{Writable: []string{work, filepath.Join(root, "missing")}, Socket: sock, Port: 47123, Keep: []string{"tine-gw-key"}, TmpDir: tmp}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "OPENAI_API_KEY=sk-real-1", "TINE_GATEWAY_KEY=tine-gw-key", "GITHUB_TOKEN=ghp-real-2"}
	bin, args, env, err := s.Command("/bin/bash", []string{"-c", script}, work, env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	start := time.Now()
	b, err := cmd.CombinedOutput()
	out := string(b)
	t.Logf("in %v:\n%s", time.Since(start), out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{"worktree: written", "tmpdir: written", "outside: refused", "tmp: refused", "hi from the gateway",
		lan + ": unreachable", hl.Addr().String() + ": unreachable", "processes: only the jail's", "TINE_GATEWAY_KEY=tine-gw-key", "TMPDIR=" + tmp} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q", want)
		}
	}
	for _, leak := range []string{"sk-real-1", "ghp-real-2", "hi from the network", "hi from the host's loopback"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q got through", leak)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); err == nil {
		t.Error("a file was written outside the jail's paths")
	}
}

// BenchmarkStart is what the jail and its relay add to a program's start
// (README: Isolation): /bin/true, and node when it is installed (the
// agents are Node programs), run directly and in a jail with its relay.
func BenchmarkStart(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	root := b.TempDir()
	sock := filepath.Join(root, "gw.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ul.Close()
	progs := [][]string{{"/bin/true"}}
	if node, err := exec.LookPath("node"); err == nil {
		progs = append(progs, []string{node, "-e", "0"})
	}
	s := &Spec{Writable: []string{root}, Socket: sock, Port: 47124, TmpDir: root}
	for _, p := range progs {
		name := filepath.Base(p[0])
		b.Run(name+"/direct", func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command(p[0], p[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/jailed", func(b *testing.B) {
			bin, args, env, err := s.Command(p[0], p[1:], root, os.Environ())
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				cmd := exec.Command(bin, args...)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}
