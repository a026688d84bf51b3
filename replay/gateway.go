package replay

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/internal/sse"
	"tine/model"
)

// Upstream is where a wire format's model calls really go (harness.Upstream).
type Upstream = harness.Upstream

// Options configure a Gateway.
type Options struct {
	// Addr to listen on; default "127.0.0.1:0". Must be loopback.
	Addr string
	// Upstreams per wire format; a run may override them.
	Upstreams map[Wire]Upstream
	// Transport for upstream calls; default a clone of
	// http.DefaultTransport. Redirects are never followed.
	Transport http.RoundTripper
	// Logf, when set, gets a line per request.
	Logf func(format string, args ...any)
	// Rules are what a replay lets differ and which tools it runs again
	// (RulesOf the registry's agents); default the wire formats' own.
	Rules *Rules
	// MaxEventBytes bounds one event of an upstream's stream (the API
	// harnesses' bound, sse.DefaultMax, when 0): a bigger one fails the
	// model call rather than fill the memory.
	MaxEventBytes int
}

// OnDivergence says what a replay does at its first divergence.
type OnDivergence string

const (
	// Stop (the default): the request that diverged, and every later one,
	// is refused with HTTP 400, so the agent stops.
	Stop OnDivergence = "stop"
	// Live: the run goes live at the divergence.
	Live OnDivergence = "live"
)

// RunConfig describes one run served by the gateway.
type RunConfig struct {
	// ID names the run in its steps (tine's run id); default the token.
	ID string
	// Recorder receives every step of the run, replayed or live; nil
	// records nothing.
	Recorder Recorder
	// Tape, when it has steps, makes this a replay: steps 1..N are
	// answered from it after their requests are checked (Compare), the
	// request of step N+1 is checked too when the tape has it, and from
	// there on the run is live.
	Tape Tape
	// N is how many steps are answered from the tape; 0 means all of it.
	N int
	// OnDivergence: Stop (default) or Live.
	OnDivergence OnDivergence
	// VerifyOnly: after the check of step N+1 the run does not go live;
	// later model calls are refused (k = 0 in rule 9: replay only verifies).
	VerifyOnly bool
	// Upstreams override the gateway's, per wire format.
	Upstreams map[Wire]Upstream
	// Snapshot, when set, is called as each model call arrives, before it
	// is answered, and returns the git tree of the run's working directory
	// (Step.Tree). A replay whose requests match but whose tree differs
	// from the taped one diverges as KindTree.
	Snapshot func() (string, error)
	// CompareTree, when set, decides whether the tree a replayed step
	// arrived with differs from the taped one, and how (a unified diff);
	// default: they differ when their hashes do.
	CompareTree func(taped, actual string) (diff string, differ bool)
	// AllowTool, when set, decides which of the tape's tool calls a replay
	// may let the agent run again; default Rules.LocalTool. A taped answer that
	// calls any other tool (web, MCP, anything unknown) is not served: the
	// replay diverges there, naming the tool (rule 9 in ARCHITECTURE.md).
	AllowTool func(wire Wire, name string) bool
	// Cwds are the working directories of the recording and of the
	// replay, made "<cwd>" in tool outputs when a tape made from a
	// transcript is checked (recorded requests name theirs).
	Cwds []string
}

// Divergence is where and how a replay left its tape.
type Divergence struct {
	Step int `json:"step"`
	*Mismatch
	// Closest is the taped step whose request is nearest the one that
	// came (fewest differing fields): Step itself, or a neighbour when a
	// model call was added or skipped; 0 when nothing was compared.
	Closest int `json:"closest,omitempty"`
	// ClosestFields is how many fields differ from Closest's request.
	ClosestFields int `json:"closest_fields,omitempty"`
}

// Detail is one line for a person: the step and the mismatch.
func (d *Divergence) Detail() string {
	s := fmt.Sprintf("step %d: %s", d.Step, d.Mismatch.String())
	if d.Closest != 0 && d.Closest != d.Step {
		s += fmt.Sprintf(" (the request is closest to taped step %d: a model call was added or skipped)", d.Closest)
	}
	return s
}

// RunStatus is where a run stands.
type RunStatus struct {
	Steps    int  `json:"steps"`    // model calls seen
	Replayed int  `json:"replayed"` // of them answered from the tape
	Checked  int  `json:"checked"`  // requests checked against the tape (and matched)
	Live     bool `json:"live"`     // model calls now go to the upstream
	// Verified: a VerifyOnly replay checked every request up to N+1 (or
	// the tape's end) without a divergence.
	Verified   bool        `json:"verified"`
	Divergence *Divergence `json:"divergence"`
	// RecordErr is the first error the Recorder returned.
	RecordErr string `json:"record_error,omitempty"`
}

// Gateway is the loopback model gateway. One serves every run of a tine
// process, at one base URL, http://127.0.0.1:PORT; each run has a key of
// its own, which its agent sends as its API key (x-api-key,
// x-goog-api-key or Authorization: Bearer) and which tells the gateway
// whose call it is. The key is the run's only secret: a base URL goes on
// an agent's command line, which every user of the machine can read, and
// a request without a run's key is refused (rule 13 in ARCHITECTURE.md).
type Gateway struct {
	opts   Options
	ln     net.Listener
	srv    *http.Server
	url    string
	client *http.Client
	done   chan struct{}

	mu   sync.Mutex
	runs map[[sha256.Size]byte]*Run // by the hash of their key
}

// Start listens on loopback and serves in the background.
func Start(opts Options) (*Gateway, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("replay: the gateway listens on loopback only, not %q", opts.Addr)
	}
	tr := opts.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		opts: opts, ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{}),
		runs: map[[sha256.Size]byte]*Run{},
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(g.done)
		_ = g.srv.Serve(ln)
	}()
	return g, nil
}

// URL is the gateway's address, e.g. "http://127.0.0.1:41234".
func (g *Gateway) URL() string { return g.url }

// Port is the port of URL.
func (g *Gateway) Port() int { return g.ln.Addr().(*net.TCPAddr).Port }

// ServeUnix serves the gateway on a Unix socket too, in a folder of its
// own that only this user can enter, until stop, which removes both: a
// replay's sandbox, which has no network, reaches the gateway through it
// (a relay in the sandbox serves it on 127.0.0.1 at Port). Requests
// through it carry their run's key like any other.
func (g *Gateway) ServeUnix() (path string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "tine-gateway-")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "gateway.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.srv.Serve(ln)
	}()
	var once sync.Once
	return path, func() {
		once.Do(func() {
			ln.Close()
			<-done
			os.RemoveAll(dir)
		})
	}, nil
}

// Close stops the gateway, cutting open exchanges.
func (g *Gateway) Close() error {
	err := g.srv.Close()
	<-g.done
	return err
}

// Run is one run served by the gateway.
type Run struct {
	g   *Gateway
	key string
	cfg RunConfig

	mu     sync.Mutex
	n      int // steps numbered so far
	status RunStatus
	norm   map[int]normalized // taped requests, normalised once
}

type normalized struct {
	v   any
	err error
}

// rules are what the gateway's replays let differ (Options.Rules).
func (g *Gateway) rules() *Rules {
	if g.opts.Rules != nil {
		return g.opts.Rules
	}
	return wireOnly()
}

// tapedNorm is step n's taped request, normalised (once per run).
func (r *Run) tapedNorm(n int) (any, error) {
	r.mu.Lock()
	nv, ok := r.norm[n]
	r.mu.Unlock()
	if ok {
		return nv.v, nv.err
	}
	s := r.cfg.Tape[n-1]
	v, err := r.g.rules().Normalize(s.Wire, s.Request)
	r.mu.Lock()
	if r.norm == nil {
		r.norm = map[int]normalized{}
	}
	r.norm[n] = normalized{v, err}
	r.mu.Unlock()
	return v, err
}

// Prepare normalises the tape's requests ahead of the replay, so that
// checking a step costs only the normalisation of the request that came.
func (r *Run) Prepare() {
	if r.cfg.Tape.FromTranscript() {
		return
	}
	for n := 1; n <= min(r.cfg.N+1, len(r.cfg.Tape)); n++ {
		r.tapedNorm(n)
	}
}

// NewRun registers a run and gives it its base URL.
func (g *Gateway) NewRun(cfg RunConfig) (*Run, error) {
	if len(cfg.Tape) == 0 && (cfg.N > 0 || cfg.VerifyOnly) {
		return nil, fmt.Errorf("replay: no tape to replay")
	}
	if len(cfg.Tape) > 0 {
		if why := cfg.Tape.Valid(); why != "" {
			return nil, fmt.Errorf("replay: %s", why)
		}
		if cfg.N < 0 || cfg.N > len(cfg.Tape) {
			return nil, fmt.Errorf("replay: step %d is outside the tape (1..%d)", cfg.N, len(cfg.Tape))
		}
		if cfg.N == 0 {
			cfg.N = len(cfg.Tape)
		}
	}
	switch cfg.OnDivergence {
	case "":
		cfg.OnDivergence = Stop
	case Live:
		if cfg.VerifyOnly {
			return nil, fmt.Errorf("replay: a replay that only verifies never goes live (on_divergence live)")
		}
	case Stop:
	default:
		return nil, fmt.Errorf("replay: on_divergence must be stop or live, not %q", cfg.OnDivergence)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	r := &Run{g: g, key: KeyPrefix + hex.EncodeToString(b[:16]), cfg: cfg}
	if r.cfg.ID == "" {
		// Named apart from its key: the ID goes on the tape.
		r.cfg.ID = hex.EncodeToString(b[16:])
	}
	r.status.Live = len(cfg.Tape) == 0
	g.mu.Lock()
	g.runs[sha256.Sum256([]byte(r.key))] = r
	g.mu.Unlock()
	if len(cfg.Tape) > 0 {
		go r.Prepare()
	}
	return r, nil
}

// KeyPrefix begins every run's key, so a key in a log or a file is known
// for what it is.
const KeyPrefix = "tine-gw-"

// URL is the run's base URL: give it to the agent as ANTHROPIC_BASE_URL,
// or with "/v1" appended as an OpenAI base URL. It holds no secret (every
// run of the gateway has the same one): the agent must send Key.
func (r *Run) URL() string { return r.g.url }

// Key is the run's secret: the API key its agent is given, by its
// environment or a file only its user reads, never on a command line
// (rule 13 in ARCHITECTURE.md). The gateway answers a call that carries
// it, as x-api-key, x-goog-api-key or "Authorization: Bearer", and sends
// the upstream the real key instead.
func (r *Run) Key() string { return r.key }

// Status is where the run stands now.
func (r *Run) Status() RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Close unregisters the run: its key opens nothing from now on.
func (r *Run) Close() {
	r.g.mu.Lock()
	delete(r.g.runs, sha256.Sum256([]byte(r.key)))
	r.g.mu.Unlock()
}

func (g *Gateway) logf(format string, args ...any) {
	if g.opts.Logf != nil {
		g.opts.Logf(format, args...)
	}
}

// wireOf tells a model call's wire format from its path; ok is false for
// anything that is not a model call.
func wireOf(method, p string) (Wire, bool) {
	p = strings.TrimRight(p, "/")
	if method != http.MethodPost {
		return "", false
	}
	if _, ok := geminiStep(p); ok {
		return WireGemini, true
	}
	switch {
	case strings.HasSuffix(p, "/messages"):
		return WireAnthropic, true
	case strings.HasSuffix(p, "/chat/completions"):
		return WireChat, true
	case strings.HasSuffix(p, "/responses"):
		return WireResponses, true
	}
	return "", false
}

// passWire picks the upstream for a call that is not a step
// (.../models, .../messages/count_tokens and the like).
func passWire(hr *http.Request, p string) Wire {
	switch {
	case strings.Contains(p, "/messages"), hr.Header.Get("Anthropic-Version") != "", hr.Header.Get("X-Api-Key") != "":
		return WireAnthropic
	case hr.Header.Get("X-Goog-Api-Key") != "", strings.Contains(p, "/v1beta/"):
		return WireGemini
	case strings.Contains(p, "/responses"):
		return WireResponses
	}
	return WireChat
}

// runOf is the run whose key the request carries, as x-api-key
// (Anthropic), x-goog-api-key (Gemini) or "Authorization: Bearer"
// (OpenAI); nil when it carries none of them. A key in the URL (the
// Gemini API's ?key=) opens nothing: URLs end up in logs.
func (g *Gateway) runOf(hr *http.Request) *Run {
	keys := []string{hr.Header.Get("X-Api-Key"), hr.Header.Get("X-Goog-Api-Key")}
	if k, ok := strings.CutPrefix(hr.Header.Get("Authorization"), "Bearer "); ok {
		keys = append(keys, strings.TrimSpace(k))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		if k == "" {
			continue
		}
		// Looked up by the key's hash: how long the lookup takes says
		// nothing of the keys.
		if r := g.runs[sha256.Sum256([]byte(k))]; r != nil {
			return r
		}
	}
	return nil
}

// ServeHTTP routes a request to the run whose key it carries; one without
// a run's key is refused, read no further, and neither forwarded nor
// recorded.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	sub := hr.URL.Path
	run := g.runOf(hr)
	if run == nil {
		wire, isStep := wireOf(hr.Method, sub)
		if !isStep {
			wire = passWire(hr, sub)
		}
		g.logf("replay: refused %s %s: no run's key", hr.Method, sub)
		writeAPIError(w, wire, http.StatusUnauthorized, "authentication_error", "tine replay gateway: the request carries no key of a run of this gateway")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(hr.Body, 256<<20))
	if err != nil {
		http.Error(w, "tine replay gateway: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	wire, isStep := wireOf(hr.Method, sub)
	if !isStep {
		up := run.upstream(passWire(hr, sub))
		g.logf("replay: run %s pass %s %s", run.cfg.ID, hr.Method, sub)
		if g.forward(w, hr, passWire(hr, sub), up, sub, raw, nil, nil) {
			panic(http.ErrAbortHandler)
		}
		return
	}
	run.serveStep(w, hr, wire, sub, raw)
}

func (r *Run) upstream(wire Wire) Upstream {
	if u, ok := r.cfg.Upstreams[wire]; ok {
		return u
	}
	return r.g.opts.Upstreams[wire]
}

// decoded is the request body without its Content-Encoding (gzip or
// deflate); other encodings are kept as sent.
func decoded(hr *http.Request, raw []byte) []byte {
	var rd io.Reader
	switch strings.ToLower(hr.Header.Get("Content-Encoding")) {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return raw
		}
		rd = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(raw))
		if err != nil {
			return raw
		}
		rd = zr
	default:
		return raw
	}
	b, err := io.ReadAll(io.LimitReader(rd, 256<<20))
	if err != nil {
		return raw
	}
	return b
}

// serveStep answers one model call: from the tape, or live.
func (r *Run) serveStep(w http.ResponseWriter, hr *http.Request, wire Wire, sub string, raw []byte) {
	started := time.Now()
	body := decoded(hr, raw)
	// Decoded once: for whether it streams, and for the check.
	v, verr := decodeJSON(body)
	top, _ := v.(map[string]any)
	stream, _ := top["stream"].(bool)
	if wire == WireGemini {
		stream, _ = geminiStep(sub)
	}
	step := Step{Run: r.cfg.ID, Wire: wire, Method: hr.Method, Path: sub, Request: json.RawMessage(body), Stream: stream, Started: started}
	// The tree is read while the request is checked or forwarded; the
	// agent gets no answer (so runs no tool) before it is read.
	tree := func() string { return "" }
	if r.cfg.Snapshot != nil {
		ch := make(chan string, 1)
		go func() {
			t, err := r.cfg.Snapshot()
			if err != nil {
				r.g.logf("replay: run %s: no snapshot of the tree: %v", r.cfg.ID, err)
			}
			ch <- t
		}()
		var once sync.Once
		var t string
		tree = func() string {
			once.Do(func() { t = <-ch })
			return t
		}
	}
	defer tree() // never leave the snapshot behind

	r.mu.Lock()
	r.n++
	step.N = r.n
	r.status.Steps = r.n
	div, live, verified := r.status.Divergence, r.status.Live, r.status.Verified
	r.mu.Unlock()

	tape, n := r.cfg.Tape, r.cfg.N
	switch {
	case div != nil && r.cfg.OnDivergence == Stop:
		r.refuse(w, wire, fmt.Sprintf("tine replay: diverged at step %d (%s); stopped", div.Step, div.Kind))
		return
	case verified:
		r.refuse(w, wire, fmt.Sprintf("tine replay: verified to step %d; not going live", n))
		return
	case !live && step.N <= len(tape) && step.N <= n+1:
		taped := tape[step.N-1]
		var m *Mismatch
		if taped.Wire != wire {
			m = &Mismatch{Kind: KindModel, Path: "(wire format)", Fields: []string{"(wire format)"}, Taped: string(taped.Wire), Actual: string(wire),
				Diff: unifiedDiff(string(taped.Wire), string(wire))}
		} else if len(taped.Request) == 0 {
			// A transcript's tape: only the tool outputs can be checked.
			if step.N > 1 {
				m = r.g.rules().compareOutputs(wire, tape[step.N-2].ToolOutputs, body, r.cfg.Cwds)
			}
		} else {
			tv, terr := r.tapedNorm(step.N)
			av, aerr := v, verr
			if aerr == nil {
				av, aerr = r.g.rules().normalizeValue(wire, v)
			}
			m = compareValues(wire, tv, terr, av, aerr, taped.Request, body)
			if m == nil && wire == WireGemini {
				m = geminiModelMismatch(taped.Path, sub)
			}
		}
		step.Tree = tree()
		if m == nil {
			m = r.treeMismatch(taped.Tree, step.Tree)
		}
		if m == nil && step.N <= n {
			m = r.outsideTool(wire, step.N, taped.Answer)
		}
		var closest, closestFields int
		if m != nil && m.Kind != KindTree && m.Note == "" {
			closest, closestFields = r.closest(wire, step.N, body)
		}
		r.mu.Lock()
		if m != nil {
			if r.status.Divergence == nil {
				r.status.Divergence = &Divergence{Step: step.N, Mismatch: m, Closest: closest, ClosestFields: closestFields}
			}
			if r.cfg.OnDivergence == Live {
				r.status.Live = true
			}
		} else {
			r.status.Checked++
			if step.N > n && r.cfg.VerifyOnly {
				r.status.Verified = true
			} else if step.N > n {
				r.status.Live = true
			}
		}
		st := r.status
		r.mu.Unlock()
		switch {
		case m != nil && r.cfg.OnDivergence == Stop:
			r.g.logf("replay: run %s step %d diverged: %s", r.cfg.ID, step.N, m)
			r.refuse(w, wire, fmt.Sprintf("tine replay: diverged at step %d: %s", step.N, m))
			return
		case st.Verified:
			r.endTurn(w, &step, n)
			return
		case m == nil && step.N <= n:
			r.serveTaped(w, &step, taped)
			r.mu.Lock()
			r.status.Replayed++
			r.mu.Unlock()
			r.record(step)
			return
		}
	case !live && r.cfg.VerifyOnly:
		// The tape ended at N: nothing left to check.
		r.mu.Lock()
		r.status.Verified = true
		r.mu.Unlock()
		r.endTurn(w, &step, n)
		return
	case !live:
		r.mu.Lock()
		r.status.Live = true
		r.mu.Unlock()
	}
	cut := r.g.forward(w, hr, wire, r.upstream(wire), sub, raw, &step, func() { step.Tree = tree() })
	step.Tree = tree()
	r.record(step)
	if cut {
		// The upstream cut the answer short: so does the gateway, so the
		// agent sees what it would have seen without it.
		panic(http.ErrAbortHandler)
	}
}

// endTurn answers the call after step N of a replay that only verifies
// with a final answer saying so, rather than an error: the agent ends its
// turn cleanly, and its session, which a person may continue from the
// world at step N, holds a plain note instead of an API error.
func (r *Run) endTurn(w http.ResponseWriter, step *Step, n int) {
	text := fmt.Sprintf("[tine] The replay verified steps 1..%d and stopped here: the files are as they were after step %d.", n, n)
	msg := model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: text}}}
	build, _ := answerer(step.Wire)
	if build == nil {
		build = chatAnswer
	}
	answer, _, err := build(msg, step.N, nil)
	if err != nil {
		r.refuse(w, step.Wire, fmt.Sprintf("tine replay: verified to step %d; not going live", n))
		return
	}
	r.serveTaped(w, step, Step{Wire: step.Wire, Status: http.StatusOK, ContentType: "application/json", Answer: answer})
}

// treeMismatch is a KindTree mismatch when both trees are known and differ.
func (r *Run) treeMismatch(taped, actual string) *Mismatch {
	if taped == "" || actual == "" {
		return nil
	}
	diff, differ := "", taped != actual
	if r.cfg.CompareTree != nil {
		diff, differ = r.cfg.CompareTree(taped, actual)
	}
	if !differ {
		return nil
	}
	return &Mismatch{Kind: KindTree, Path: "(working tree)", Fields: []string{"(working tree)"}, Taped: taped, Actual: actual,
		Diff: diff, Note: "the files the tools left differ from the recorded ones"}
}

// outsideTool is a mismatch when taped step n's answer calls a tool that a
// replay does not run again.
func (r *Run) outsideTool(wire Wire, n int, answer json.RawMessage) *Mismatch {
	allow := r.cfg.AllowTool
	if allow == nil {
		allow = r.g.rules().LocalTool
	}
	for _, name := range ToolNames(wire, answer) {
		if !allow(wire, name) {
			return &Mismatch{Kind: KindTool, Path: "tool " + name, Fields: []string{"tool " + name},
				Note: fmt.Sprintf("step %d's answer calls %s, which acts outside the sandbox (web, MCP or unknown); a replay never runs it again", n, name)}
		}
	}
	return nil
}

// closest finds the taped step nearest a request that did not match step
// n: n itself unless a neighbour matches better.
func (r *Run) closest(wire Wire, n int, body []byte) (step, fields int) {
	av, err := r.g.rules().Normalize(wire, body)
	if err != nil || r.cfg.Tape.FromTranscript() {
		return 0, 0
	}
	step, fields = 0, -1
	for _, j := range []int{n, n - 1, n + 1} {
		if j < 1 || j > len(r.cfg.Tape) || r.cfg.Tape[j-1].Wire != wire {
			continue
		}
		tv, terr := r.tapedNorm(j)
		if terr != nil {
			continue
		}
		c := &comparer{wire: wire}
		c.walk("", tv, av, false)
		if f := len(c.model) + len(c.tool); fields < 0 || f < fields {
			step, fields = j, f
		}
	}
	return step, max(fields, 0)
}

func (r *Run) record(s Step) {
	if r.cfg.Recorder == nil {
		return
	}
	if err := r.cfg.Recorder.Record(s); err != nil {
		r.mu.Lock()
		if r.status.RecordErr == "" {
			r.status.RecordErr = err.Error()
		}
		r.mu.Unlock()
	}
}

// refuse answers HTTP 400 in the wire format's error shape: agents do not
// retry a 400.
func (r *Run) refuse(w http.ResponseWriter, wire Wire, msg string) {
	writeAPIError(w, wire, http.StatusBadRequest, "invalid_request_error", msg)
}

func writeAPIError(w http.ResponseWriter, wire Wire, status int, typ, msg string) {
	var v any = apiError(wire, typ, msg)
	if wire == WireGemini {
		v = geminiError(status, msg)
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// apiError is an error body in wire's shape.
func apiError(wire Wire, typ, msg string) any {
	if wire == WireAnthropic {
		return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": "tine_replay", "param": nil}}
}

// streamError is an error event in wire's stream: Anthropic's "error"
// event, a Chat Completions chunk holding an error, a Responses "error"
// event.
func streamError(wire Wire, msg string) Event {
	var v any
	name := "error"
	switch wire {
	case WireAnthropic:
		v = apiError(wire, "api_error", msg)
	case WireResponses:
		v = map[string]any{"type": "error", "code": "tine_replay", "message": msg, "param": nil}
	case WireGemini:
		v, name = geminiError(http.StatusBadGateway, msg), ""
	default:
		v, name = apiError(wire, "api_error", msg), ""
	}
	b, _ := json.Marshal(v)
	return Event{Event: name, Data: string(b)}
}

// serveTaped answers from a taped step, in the shape the request asks
// for: the taped events or body as they were when the request streams as
// the recording did, else the taped answer re-encoded.
func (r *Run) serveTaped(w http.ResponseWriter, step *Step, taped Step) {
	step.Source = FromTape
	step.Status = taped.Status
	step.ContentType = taped.ContentType
	if taped.Status/100 != 2 {
		// A taped failure (a 429 the agent retried): serve it at once.
		if taped.RetryAfter != "" {
			w.Header().Set("Retry-After", "0")
			step.RetryAfter = "0"
		}
		if taped.ContentType != "" {
			w.Header().Set("Content-Type", taped.ContentType)
		}
		w.WriteHeader(taped.Status)
		_, _ = w.Write(taped.Body)
		step.Body = taped.Body
		step.Duration = time.Since(step.Started)
		return
	}
	events, body := taped.Events, taped.Body
	switch {
	case step.Stream && taped.Stream && events != nil:
	case !step.Stream && !taped.Stream && body != nil:
	case step.Stream && taped.Answer != nil:
		events, body = encodeStream(step.Wire, taped.Answer, step.Request), nil
	case !step.Stream && taped.Answer != nil:
		events, body = nil, taped.Answer
	default:
		step.Status = http.StatusBadGateway
		step.Error = "the taped answer cannot be served in the shape asked for"
		writeAPIError(w, step.Wire, http.StatusBadGateway, "api_error", "tine replay: "+step.Error)
		return
	}
	step.Answer = taped.Answer
	if step.Stream {
		step.ContentType = "text/event-stream"
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		step.FirstByte = time.Since(step.Started)
		for _, ev := range events {
			if writeEvent(w, ev) != nil {
				step.Error = "the agent hung up mid-stream"
				break
			}
		}
		step.Events = events
	} else {
		if step.ContentType == "" || step.ContentType == "text/event-stream" {
			step.ContentType = "application/json"
		}
		w.Header().Set("Content-Type", step.ContentType)
		w.WriteHeader(http.StatusOK)
		step.FirstByte = time.Since(step.Started)
		_, _ = w.Write(body)
		step.Body = body
	}
	step.Duration = time.Since(step.Started)
}

// hop-by-hop and credential headers never passed on.
var dropRequestHeaders = []string{
	"Host", "Content-Length", "Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Authorization", "X-Api-Key", "X-Goog-Api-Key", "Accept-Encoding",
}

var dropResponseHeaders = []string{
	"Content-Length", "Connection", "Keep-Alive", "Proxy-Authenticate", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade",
}

// target builds the upstream URL: the upstream's scheme and host always,
// its path joined with the request's.
func target(base, sub, query string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("upstream base URL %q is not an http(s) URL", base)
	}
	bp := strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(bp, "/v1") && (sub == "/v1" || strings.HasPrefix(sub, "/v1/")) {
		sub = strings.TrimPrefix(sub, "/v1")
	}
	u.Path = path.Clean(bp + "/" + strings.TrimLeft(sub, "/"))
	u.RawPath = ""
	u.RawQuery = query
	u.Fragment = ""
	u.User = nil
	return u, nil
}

// forward sends the request to the upstream with the real key and streams
// the answer back; when step is not nil it fills it in. cut reports that
// the upstream's answer broke off after it had begun.
// ready, when set, is called before the answer's first byte goes to the
// agent.
func (g *Gateway) forward(w http.ResponseWriter, hr *http.Request, wire Wire, up Upstream, sub string, raw []byte, step *Step, ready func()) (cut bool) {
	if ready != nil {
		defer func() { ready() }() // also when it failed before answering
	}
	fail := func(status int, msg string) {
		if step != nil {
			step.Status, step.Error, step.Source = status, msg, FromUpstream
			step.Duration = time.Since(step.Started)
		}
		writeAPIError(w, wire, status, "api_error", "tine replay gateway: "+msg)
	}
	if up.BaseURL == "" {
		fail(http.StatusBadGateway, fmt.Sprintf("no upstream for %s", wire))
		return
	}
	query := hr.URL.RawQuery
	if wire == WireGemini && hr.URL.Query().Has("key") {
		// The Gemini API also takes a key in the query: never the
		// agent's key, only the real one, in its header.
		q := hr.URL.Query()
		q.Del("key")
		query = q.Encode()
	}
	u, err := target(up.BaseURL, sub, query)
	if err != nil {
		fail(http.StatusBadGateway, err.Error())
		return
	}
	req, err := http.NewRequestWithContext(hr.Context(), hr.Method, u.String(), bytes.NewReader(raw))
	if err != nil {
		fail(http.StatusBadGateway, err.Error())
		return
	}
	req.Header = hr.Header.Clone()
	for _, h := range dropRequestHeaders {
		req.Header.Del(h)
	}
	if up.APIKey != "" {
		if wire == WireAnthropic {
			req.Header.Set("X-Api-Key", up.APIKey)
		} else if wire == WireGemini {
			req.Header.Set("X-Goog-Api-Key", up.APIKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+up.APIKey)
		}
	}
	req.ContentLength = int64(len(raw))
	resp, err := g.client.Do(req)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fail(499, "the agent hung up")
			return
		}
		fail(http.StatusBadGateway, "upstream: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		fail(http.StatusBadGateway, fmt.Sprintf("upstream redirected (%d to %q); not followed, so the key stays with %s", resp.StatusCode, resp.Header.Get("Location"), u.Host))
		return
	}
	if step != nil {
		step.Source = FromUpstream
		step.Status = resp.StatusCode
		step.FirstByte = time.Since(step.Started)
		step.ContentType = resp.Header.Get("Content-Type")
		step.RetryAfter = resp.Header.Get("Retry-After")
	}
	for k, vs := range resp.Header {
		w.Header()[k] = append([]string(nil), vs...)
	}
	for _, h := range dropResponseHeaders {
		w.Header().Del(h)
	}
	if resp.Uncompressed {
		w.Header().Del("Content-Encoding")
	}
	if ready != nil {
		ready()
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		if fl != nil {
			fl.Flush()
		}
		sr := newSSEReader(resp.Body, g.opts.MaxEventBytes)
		for {
			rawEv, ev, ok, err := sr.next()
			if len(rawEv) > 0 {
				if _, werr := w.Write(rawEv); werr != nil && step != nil && step.Error == "" {
					step.Error = "the agent hung up mid-stream"
				}
				if fl != nil {
					fl.Flush()
				}
			}
			if ok && step != nil {
				step.Events = append(step.Events, ev)
			}
			if err != nil {
				if err != io.EOF {
					cut = true
					if step != nil && step.Error == "" {
						step.Error = "upstream stream: " + err.Error()
					}
					var big *sse.TooLargeError
					if errors.As(err, &big) {
						// Nothing of that event went on: the agent is told
						// why in its API's words before the stream is cut.
						_ = writeEvent(w, streamError(wire, "tine replay gateway: the upstream sent "+err.Error()))
					}
				}
				break
			}
		}
		if step != nil {
			if resp.StatusCode/100 == 2 {
				step.Answer = Assemble(wire, step.Events)
			}
			step.Duration = time.Since(step.Started)
		}
		return
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	_, _ = w.Write(b)
	cut = err != nil
	if step != nil {
		step.Body = b
		if err != nil {
			step.Error = "upstream body: " + err.Error()
		} else if resp.StatusCode/100 == 2 && json.Valid(b) {
			step.Answer = json.RawMessage(b)
		}
		step.Duration = time.Since(step.Started)
	}
	return cut
}
