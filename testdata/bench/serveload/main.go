// Command serveload puts tine serve under load: CLIENTS clients at once
// for DURATION, each in a loop of reads (a run with its transcript, a
// run's checkpoints, a fork's status, a fork with its transcript),
// searches and forks continued by the openai harness against the scripted
// model server (internal/modelserver), all on loopback; and FOLLOWERS
// clients following GET /api/events. Then it waits for every fork the
// clients were told about to settle, and says: how many requests of each
// kind, their latency (p50, p90, p99, max), every error, every fork made
// and how it ended, the events followed, and the server's CPU time.
//
// Not a test: figures, for the closing note of the work that made tine
// serve (issue 28) and for anyone changing it.
//
//	go run ./testdata/bench/serveload [-clients 50] [-duration 60s] [-tine BIN]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tine/internal/modelserver"
)

func main() {
	clients := flag.Int("clients", 50, "clients at once")
	duration := flag.Duration("duration", 60*time.Second, "how long the clients go on")
	followers := flag.Int("followers", 2, "clients following GET /api/events")
	forkShare := flag.Float64("forks", 0.05, "the share of requests that fork")
	searchShare := flag.Float64("searches", 0.25, "the share of requests that search")
	parallel := flag.Int("parallel", 8, "tine serve --parallel")
	queue := flag.Int("queue", 2000, "tine serve --queue")
	tine := flag.String("tine", "", "the tine binary (default: built from this checkout)")
	keep := flag.Bool("keep", false, "keep the database")
	flag.Parse()

	dir, err := os.MkdirTemp("", "serveload-")
	check(err)
	if !*keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("database in", dir)
	}
	if *tine == "" {
		*tine = filepath.Join(dir, "tine")
		build := exec.Command("go", "build", "-o", *tine, ".")
		build.Dir = moduleRoot()
		build.Stderr = os.Stderr
		check(build.Run())
	}
	srv, err := modelserver.Start(modelserver.Options{Model: "load-model",
		Default: &modelserver.Reply{Text: "A short answer for the load test.", Usage: modelserver.Usage{InputTokens: 120, OutputTokens: 8}}})
	check(err)
	defer srv.Close()

	db := filepath.Join(dir, "t.db")
	imp := exec.Command(*tine, "--db", db, "import", filepath.Join(moduleRoot(), "testdata", "openai"), "--json")
	out, err := imp.Output()
	check(err)
	var sum struct {
		RunIDs []string `json:"run_ids"`
	}
	check(json.Unmarshal(out, &sum))
	seed := sum.RunIDs[0]

	serve := exec.Command(*tine, "--db", db, "serve", "--listen", "127.0.0.1:0", "--parallel", fmt.Sprint(*parallel), "--queue", fmt.Sprint(*queue))
	serve.Env = append(os.Environ(), "OPENAI_BASE_URL="+srv.URL()+"/v1", "OPENAI_API_KEY=sk-load", "OPENAI_MODEL=load-model")
	serveOut, err := serve.StdoutPipe()
	check(err)
	serve.Stderr = os.Stderr
	check(serve.Start())
	defer func() {
		serve.Process.Signal(syscall.SIGINT)
		serve.Wait()
	}()
	url := ""
	sc := bufio.NewScanner(serveOut)
	for sc.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		if strings.HasPrefix(sc.Text(), "try:") {
			break
		}
	}
	go io.Copy(io.Discard, serveOut)
	tok, err := os.ReadFile(db + "-token")
	check(err)
	c := &client{url: url, token: strings.TrimSpace(string(tok)),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients + *followers + 4}, Timeout: 2 * time.Minute}}

	fmt.Printf("tine serve at %s, pid %d, --parallel %d --queue %d; %d clients for %s (%.0f%% forks, %.0f%% searches, the rest reads), %d following events; %d cores\n",
		url, serve.Process.Pid, *parallel, *queue, *clients, *duration, *forkShare*100, *searchShare*100, *followers, runtime.NumCPU())

	// A few forks to read from the start.
	var forks forkList
	for range 5 {
		id, err := c.fork(seed, 0)
		check(err)
		forks.add(id)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var events atomic.Int64
	followCtx, stopFollow := context.WithCancel(context.Background())
	var fwg sync.WaitGroup
	for range *followers {
		fwg.Go(func() { c.follow(followCtx, &events) })
	}
	stats := newStats()
	var wg sync.WaitGroup
	var seq, busy atomic.Int64
	for range *clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				p := rand.Float64()
				switch {
				case p < *forkShare:
					start := time.Now()
					id, err := c.fork(seed, seq.Add(1))
					if errors.Is(err, errBusy) {
						// The queue's backpressure: counted, and honoured
						// (a well-behaved client waits before it forks again).
						busy.Add(1)
						time.Sleep(time.Second)
						continue
					}
					stats.add("fork", time.Since(start), err)
					if err == nil {
						forks.add(id)
					}
				case p < *forkShare+*searchShare:
					q := words[rand.IntN(len(words))]
					stats.timed("search", func() error { return c.get("/api/search?limit=20&q=" + q) })
				default:
					switch rand.IntN(4) {
					case 0:
						stats.timed("read", func() error { return c.get("/api/runs/" + seed) })
					case 1:
						stats.timed("read", func() error { return c.get("/api/runs/" + seed + "/checkpoints") })
					case 2:
						stats.timed("read", func() error { return c.get("/api/forks/" + forks.pick()) })
					default:
						stats.timed("read", func() error { return c.get("/api/runs/" + forks.pick()) })
					}
				}
			}
		})
	}
	wg.Wait()
	loadCPU := cpuSeconds(serve.Process.Pid)

	// Every fork the clients were told about exists, and settles.
	made := forks.all()
	settleStart := time.Now()
	statuses := map[string]string{}
	for time.Since(settleStart) < 3*time.Minute {
		var runs []struct{ ID, Status string }
		body, err := c.body("/api/runs")
		check(err)
		check(json.Unmarshal(body, &runs))
		byID := map[string]string{}
		for _, r := range runs {
			byID[r.ID] = r.Status
		}
		pending := 0
		for _, id := range made {
			st := byID[id]
			statuses[id] = st
			if st == "" || st == "pending" || st == "queued" || st == "running" {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	settled := time.Since(settleStart)
	time.Sleep(500 * time.Millisecond)
	stopFollow()
	fwg.Wait()

	fmt.Println()
	stats.print()
	ends := map[string]int{}
	for _, id := range made {
		st := statuses[id]
		if st == "" {
			st = "missing"
		}
		ends[st]++
	}
	fmt.Printf("\nforks the clients were told about: %d; how they ended %v, %.1fs after the load stopped\n", len(made), ends, settled.Seconds())
	fmt.Printf("forks refused busy (429, the queue full; the client waited 1 s): %d\n", busy.Load())
	fmt.Printf("events followed: %d (by %d clients)\n", events.Load(), *followers)
	fmt.Printf("tine serve CPU: %.1f s over the %s of load (%.0f%% of one core)\n", loadCPU, *duration, 100*loadCPU/duration.Seconds())
	if errs := stats.errors(); errs > 0 || ends["missing"] > 0 {
		fmt.Printf("FAILED: %d errors, %d forks missing\n", errs, ends["missing"])
		os.Exit(1)
	}
}

// errBusy is a 429: the server's queue of turns is full.
var errBusy = errors.New("busy")

var words = []string{"paris", "rome", "oslo", "weather", "load", "answer", "short", "test", "say", "sunny"}

// client is an HTTP client of tine serve, with its token.
type client struct {
	url, token string
	http       *http.Client
}

func (c *client) do(method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return nil, errBusy
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}

func (c *client) get(path string) error { _, err := c.do("GET", path, nil); return err }

func (c *client) body(path string) ([]byte, error) { return c.do("GET", path, nil) }

// fork forks run with a message, continued by the openai harness.
func (c *client) fork(run string, n int64) (string, error) {
	data, err := c.do("POST", "/api/runs/"+run+"/fork", map[string]any{
		"message": fmt.Sprintf("load test message %d: say something short", n), "harness": "openai", "model": "load-model"})
	if err != nil {
		return "", err
	}
	var out struct {
		TrialIDs []string `json:"trial_ids"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.TrialIDs) != 1 {
		return "", fmt.Errorf("fork: %s", data)
	}
	return out.TrialIDs[0], nil
}

// follow counts the events of GET /api/events until ctx ends.
func (c *client) follow(ctx context.Context, n *atomic.Int64) {
	req, _ := http.NewRequestWithContext(ctx, "GET", c.url+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: ") {
			n.Add(1)
			if sc.Text() == "event: lagged" {
				fmt.Println("a follower lagged")
			}
		}
	}
}

// forkList is the forks the clients were told about.
type forkList struct {
	mu  sync.Mutex
	ids []string
}

func (f *forkList) add(id string) { f.mu.Lock(); f.ids = append(f.ids, id); f.mu.Unlock() }

func (f *forkList) pick() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[rand.IntN(len(f.ids))]
}

func (f *forkList) all() []string { f.mu.Lock(); defer f.mu.Unlock(); return slices.Clone(f.ids) }

// stats are each kind's latencies and errors.
type stats struct {
	mu   sync.Mutex
	lat  map[string][]time.Duration
	errs map[string][]string
}

func newStats() *stats { return &stats{lat: map[string][]time.Duration{}, errs: map[string][]string{}} }

func (s *stats) timed(kind string, f func() error) {
	start := time.Now()
	err := f()
	s.add(kind, time.Since(start), err)
}

func (s *stats) add(kind string, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat[kind] = append(s.lat[kind], d)
	if err != nil {
		s.errs[kind] = append(s.errs[kind], err.Error())
	}
}

func (s *stats) errors() int {
	n := 0
	for _, e := range s.errs {
		n += len(e)
	}
	return n
}

func (s *stats) print() {
	fmt.Printf("%-7s %8s %7s %8s %8s %8s %8s\n", "kind", "requests", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms")
	for _, kind := range []string{"read", "search", "fork"} {
		l := slices.Clone(s.lat[kind])
		slices.Sort(l)
		q := func(p float64) string {
			if len(l) == 0 {
				return "-"
			}
			return strconv.FormatFloat(float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds())/1000, 'f', 1, 64)
		}
		fmt.Printf("%-7s %8d %7d %8s %8s %8s %8s\n", kind, len(l), len(s.errs[kind]), q(0.50), q(0.90), q(0.99), q(1))
	}
	for kind, errs := range s.errs {
		for i, e := range errs {
			if i == 5 {
				fmt.Printf("  %s: ... and %d more\n", kind, len(errs)-5)
				break
			}
			fmt.Printf("  %s: %s\n", kind, e)
		}
	}
}

// cpuSeconds is the user and system time process pid has used (Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks: 100 a second on Linux
}

// moduleRoot is the checkout this command is run from (go run from its
// root).
func moduleRoot() string {
	wd, err := os.Getwd()
	check(err)
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(1)
	}
}
