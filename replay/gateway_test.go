package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"tine/internal/modelserver"
)

// placeholder is the key a plain server (no gateway's run) gets.
const placeholder = "tine-placeholder-key"

// postTo is what a test posts to: a gateway's run (its URL, with its
// key) or a plain server.
type postTo interface {
	URL() string
	Key() string
}

// plainURL is a server that is not a gateway's run: it gets a placeholder key.
type plainURL string

func (u plainURL) URL() string { return string(u) }
func (plainURL) Key() string   { return placeholder }

// setKey puts key where an agent of wire sends its API key.
func setKey(req *http.Request, wire Wire, key string) {
	switch wire {
	case WireAnthropic:
		req.Header.Set("X-Api-Key", key)
	case WireGemini:
		req.Header.Set("X-Goog-Api-Key", key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
}

// post sends a model call the way the agent's SDK would, with to's key,
// and returns the status and the whole answer.
func post(t testing.TB, to postTo, p string, wire Wire, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, to.URL()+p, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	setKey(req, wire, to.Key())
	if wire == WireAnthropic {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

type env struct {
	ms *modelserver.Server
	g  *Gateway
}

func newEnv(t testing.TB) *env {
	ms := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { ms.Close() })
	ups := map[Wire]Upstream{}
	for _, w := range []Wire{WireAnthropic, WireChat, WireResponses, WireGemini} {
		ups[w] = Upstream{BaseURL: ms.URL(), APIKey: "real-key"}
	}
	g, err := Start(Options{Upstreams: ups, Rules: testRules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &env{ms, g}
}

// record runs c's three requests through a recording run.
func (e *env) record(t testing.TB, c *cli) (Tape, [][]byte) {
	t.Helper()
	for _, fx := range c.main {
		e.ms.Push(*fx.Reply)
	}
	rec := &MemRecorder{}
	run, err := e.g.NewRun(RunConfig{ID: "rec-" + c.name, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var answers [][]byte
	for i, fx := range c.main {
		status, b := post(t, run, fx.Path, c.wire, fx.Body)
		if status != 200 {
			t.Fatalf("record step %d: %d %s", i+1, status, b)
		}
		answers = append(answers, b)
	}
	return Tape(rec.Steps()), answers
}

func TestRecord(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			tape, answers := e.record(t, c)
			reqs := e.ms.ModelRequests()
			if len(reqs) != 3 || len(tape) != 3 {
				t.Fatalf("upstream saw %d calls, tape has %d steps", len(reqs), len(tape))
			}
			for k, r := range reqs {
				key := map[Wire]string{WireAnthropic: r.Header.Get("X-Api-Key"), WireGemini: r.Header.Get("X-Goog-Api-Key")}[c.wire]
				if key == "" {
					key = r.Header.Get("Authorization")
				}
				if !strings.Contains(key, "real-key") || strings.Contains(strings.Join(flat(r.Header), " "), KeyPrefix) {
					t.Errorf("step %d: upstream got key %q, headers %v", k+1, key, r.Header)
				}
				if !bytes.Equal(r.Body, c.main[k].Body) {
					t.Errorf("step %d: upstream got another body", k+1)
				}
			}
			for k, s := range tape {
				if s.N != k+1 || s.Run != "rec-"+c.name || s.Wire != c.wire || s.Status != 200 || !s.Stream || s.Source != FromUpstream || s.Error != "" {
					t.Errorf("step %d: %+v", k+1, s)
				}
				if len(s.Events) < 3 || s.Answer == nil {
					t.Fatalf("step %d: %d events, answer %s", k+1, len(s.Events), s.Answer)
				}
				if !bytes.Equal(s.Request, c.main[k].Body) {
					t.Errorf("step %d: request not taped as sent", k+1)
				}
				// What the agent got is exactly the upstream's stream.
				var evs []Event
				sr := newSSEReader(bytes.NewReader(answers[k]), 0)
				for {
					_, ev, ok, err := sr.next()
					if ok {
						evs = append(evs, ev)
					}
					if err != nil {
						break
					}
				}
				if len(evs) != len(s.Events) {
					t.Errorf("step %d: agent got %d events, tape has %d", k+1, len(evs), len(s.Events))
				}
			}
			// The assembled answer holds what the script said.
			text, thinking, name, args := answerParts(t, c.wire, tape[1].Answer)
			if text != "I'll run it." || thinking != "The user wants me to run a shell command." || name != c.main[1].Reply.ToolCalls[0].Name || !jsonEqual([]byte(args), c.main[1].Reply.ToolCalls[0].Input) {
				t.Errorf("step 2 answer: %q %q %q %q from %s", text, thinking, name, args, tape[1].Answer)
			}
			if !strings.Contains(string(tape[2].Answer), "The command printed: hi") {
				t.Errorf("step 3 answer: %s", tape[2].Answer)
			}
		})
	}
}

func flat(h http.Header) []string {
	var out []string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, k+": "+v)
		}
	}
	return out
}

// TestReplay: a recording replayed, clean and changed one thing at a time.
func TestReplay(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			tape, answers := e.record(t, c)
			bodies := func() [][]byte {
				var out [][]byte
				for _, fx := range c.main {
					out = append(out, append([]byte(nil), fx.Body...))
				}
				return out
			}
			type want struct {
				step   int // 0: no divergence
				kind   Kind
				status []int
			}
			cases := []struct {
				name   string
				change func(b [][]byte)
				want   want
			}{
				{"clean", func([][]byte) {}, want{0, "", []int{200, 200, 200}}},
				{"date and cwd", func(b [][]byte) {
					for k := range b {
						b[k] = replace(t, b[k], c.date, "2027-03-01")
						b[k] = replace(t, b[k], c.cwd, "/srv/worktrees/run-fork-1")
						if c.wire == WireAnthropic {
							b[k] = replace(t, b[k], mangle(c.cwd), mangle("/srv/worktrees/run-fork-1"))
						}
						b[k] = reorder(t, b[k])
					}
				}, want{0, "", []int{200, 200, 200}}},
				{"tool output", func(b [][]byte) {
					b[2] = replace(t, b[2], c.toolOut, c.toolOut+`\nnew-file.txt`)
				}, want{3, KindTool, []int{200, 200, 400}}},
				{"network", func(b [][]byte) {
					b[2] = replace(t, b[2], c.toolOut, `curl: (6) Could not resolve host: proxy.golang.org`)
				}, want{3, KindNetwork, []int{200, 200, 400}}},
				{"system prompt", func(b [][]byte) {
					for k := range b {
						b[k] = replace(t, b[k], c.system, "You are another agent.")
					}
				}, want{1, KindModel, []int{400, 400, 400}}},
				{"model setting", func(b [][]byte) {
					b[1] = replace(t, b[1], c.setting[0], c.setting[1])
				}, want{2, KindModel, []int{200, 400, 400}}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := len(e.ms.ModelRequests())
					rec := &MemRecorder{}
					run, err := e.g.NewRun(RunConfig{ID: "replay", Tape: tape, Recorder: rec})
					if err != nil {
						t.Fatal(err)
					}
					defer run.Close()
					b := bodies()
					tc.change(b)
					for k := range b {
						status, got := post(t, run, c.main[k].Path, c.wire, b[k])
						if status != tc.want.status[k] {
							t.Fatalf("step %d: status %d, want %d: %s", k+1, status, tc.want.status[k], got)
						}
						if status == 200 && !bytes.Equal(got, answers[k]) {
							t.Errorf("step %d: replayed answer differs from the recorded one", k+1)
						}
					}
					st := run.Status()
					if after := len(e.ms.ModelRequests()); after != before {
						t.Errorf("the upstream got %d calls during the replay", after-before)
					}
					if tc.want.step == 0 {
						if st.Divergence != nil {
							t.Fatalf("diverged: %s\n%s", st.Divergence.Detail(), st.Divergence.Diff)
						}
						if st.Replayed != 3 || st.Checked != 3 || len(rec.Steps()) != 3 || rec.Steps()[2].Source != FromTape {
							t.Errorf("status %+v, %d steps recorded", st, len(rec.Steps()))
						}
						return
					}
					d := st.Divergence
					if d == nil || d.Step != tc.want.step || d.Kind != tc.want.kind {
						t.Fatalf("divergence %+v, want step %d %s", d, tc.want.step, tc.want.kind)
					}
					if d.Diff == "" || !strings.Contains(d.Detail(), "step ") {
						t.Errorf("no diff or detail: %q", d.Detail())
					}
					t.Logf("%s", d.Detail())
				})
			}
		})
	}
}

// TestReplayLiveAfterN: steps 1..N from the tape, the request of step N+1
// checked, then live; VerifyOnly stops there; a divergence with Live goes
// live at once.
func TestReplayLiveAfterN(t *testing.T) {
	c := &clis[0]
	loadCLI(t, c)
	e := newEnv(t)
	tape, answers := e.record(t, c)

	t.Run("live after N", func(t *testing.T) {
		before := len(e.ms.ModelRequests())
		rec := &MemRecorder{}
		run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 2, Recorder: rec})
		defer run.Close()
		e.ms.Push(modelserver.Text("a live answer"))
		for k, fx := range c.main {
			status, got := post(t, run, fx.Path, c.wire, fx.Body)
			if status != 200 {
				t.Fatalf("step %d: %d %s", k+1, status, got)
			}
			if k == 2 && (bytes.Equal(got, answers[2]) || !strings.Contains(string(got), "a live ")) {
				t.Errorf("step 3 was not live: %s", got)
			}
		}
		st := run.Status()
		steps := rec.Steps()
		if st.Replayed != 2 || st.Checked != 3 || !st.Live || st.Divergence != nil || len(e.ms.ModelRequests()) != before+1 {
			t.Errorf("status %+v, upstream calls %d", st, len(e.ms.ModelRequests())-before)
		}
		if len(steps) != 3 || steps[0].Source != FromTape || steps[2].Source != FromUpstream || !strings.Contains(string(steps[2].Answer), "a live answer") {
			t.Errorf("steps recorded: %d", len(steps))
		}
	})
	t.Run("verify only", func(t *testing.T) {
		run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 2, VerifyOnly: true})
		defer run.Close()
		var statuses []int
		var last []byte
		before := len(e.ms.ModelRequests())
		for _, fx := range c.main {
			s, b := post(t, run, fx.Path, c.wire, fx.Body)
			statuses, last = append(statuses, s), b
		}
		st := run.Status()
		// The call after N ends the agent's turn with a note, not an error,
		// and never reaches the model.
		if !st.Verified || st.Live || st.Divergence != nil || statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 200 ||
			!strings.Contains(string(last), "verified steps 1..2 and stopped here") || len(e.ms.ModelRequests()) != before {
			t.Errorf("status %+v, statuses %v, last answer %.200s", st, statuses, last)
		}
		if s, _ := post(t, run, c.main[2].Path, c.wire, c.main[2].Body); s != 400 {
			t.Errorf("a call after the end: %d", s)
		}
	})
	t.Run("verify only, a divergence at N+1", func(t *testing.T) {
		run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 2, VerifyOnly: true})
		defer run.Close()
		for k, fx := range c.main {
			b := []byte(fx.Body)
			if k == 2 {
				b = replace(t, b, c.toolOut, "other")
			}
			post(t, run, fx.Path, c.wire, b)
		}
		if st := run.Status(); st.Verified || st.Divergence == nil || st.Divergence.Step != 3 || st.Divergence.Kind != KindTool {
			t.Errorf("status %+v", st)
		}
	})
	t.Run("verify only never goes live", func(t *testing.T) {
		if _, err := e.g.NewRun(RunConfig{Tape: tape, VerifyOnly: true, OnDivergence: Live}); err == nil {
			t.Error("accepted")
		}
		if _, err := e.g.NewRun(RunConfig{Tape: tape, N: 9}); err == nil {
			t.Error("N beyond the tape accepted")
		}
		if _, err := e.g.NewRun(RunConfig{N: 2}); err == nil {
			t.Error("a replay without a tape accepted")
		}
		if _, err := e.g.NewRun(RunConfig{Tape: Tape{{N: 1}, {N: 2, Request: []byte(`{}`)}}}); err == nil {
			t.Error("a tape with requests on some steps only accepted")
		}
		if _, err := e.g.NewRun(RunConfig{Tape: Tape{{N: 1}, {N: 2}}}); err != nil {
			t.Errorf("a transcript's tape (no requests) refused: %v", err)
		}
	})
	t.Run("on divergence live", func(t *testing.T) {
		before := len(e.ms.ModelRequests())
		run, _ := e.g.NewRun(RunConfig{Tape: tape, OnDivergence: Live})
		defer run.Close()
		e.ms.Push(modelserver.Text("live after the divergence"))
		for k, fx := range c.main {
			b := []byte(fx.Body)
			if k == 2 {
				b = replace(t, b, c.toolOut, "other")
			}
			if s, got := post(t, run, fx.Path, c.wire, b); s != 200 {
				t.Fatalf("step %d: %d %s", k+1, s, got)
			}
		}
		st := run.Status()
		if !st.Live || st.Divergence == nil || st.Divergence.Step != 3 || len(e.ms.ModelRequests()) != before+1 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestReplayShapes: a step taped streaming is served to a request that does
// not stream as one JSON answer, and the other way round.
func TestReplayShapes(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			tape, _ := e.record(t, c)
			run, _ := e.g.NewRun(RunConfig{Tape: tape})
			defer run.Close()
			for k, fx := range c.main {
				p, b := unstreamed(t, c.wire, fx)
				status, got := post(t, run, p, c.wire, b)
				if status != 200 || !jsonEqual(got, tape[k].Answer) {
					t.Fatalf("step %d: %d %s\nwant %s", k+1, status, got, tape[k].Answer)
				}
			}
			// The other way: taped without a stream, asked with one.
			flat := make(Tape, len(tape))
			for k, s := range tape {
				s.Stream, s.Events, s.Body = false, nil, s.Answer
				flat[k] = s
			}
			run2, _ := e.g.NewRun(RunConfig{Tape: flat})
			defer run2.Close()
			for k, fx := range c.main {
				status, got := post(t, run2, fx.Path, c.wire, fx.Body)
				if status != 200 {
					t.Fatalf("step %d: %d %s", k+1, status, got)
				}
				var evs []Event
				sr := newSSEReader(bytes.NewReader(got), 0)
				for {
					_, ev, ok, err := sr.next()
					if ok {
						evs = append(evs, ev)
					}
					if err != nil {
						break
					}
				}
				if a := Assemble(c.wire, evs); !jsonEqual(a, tape[k].Answer) {
					t.Errorf("step %d: re-encoded stream assembles to\n%s\nwant\n%s", k+1, a, tape[k].Answer)
				}
			}
		})
	}
}

// unstreamed is fx asked without a stream: its body says so, or, for the
// Gemini API, its path.
func unstreamed(t testing.TB, wire Wire, fx fixture) (string, []byte) {
	if wire == WireGemini {
		if !strings.Contains(fx.Path, ":streamGenerateContent") {
			t.Fatalf("%s does not stream", fx.Path)
		}
		return strings.Replace(fx.Path, ":streamGenerateContent", ":generateContent", 1), fx.Body
	}
	return fx.Path, replace(t, fx.Body, `"stream":true`, `"stream":false`)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestRunsApart: runs served at once number their steps apart.
func TestRunsApart(t *testing.T) {
	c := &clis[2]
	loadCLI(t, c)
	e := newEnv(t)
	recs := []*MemRecorder{{}, {}, {}}
	var wg sync.WaitGroup
	for r := range recs {
		run, _ := e.g.NewRun(RunConfig{ID: string(rune('a' + r)), Recorder: recs[r]})
		defer run.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				post(t, run, c.main[0].Path, c.wire, c.main[0].Body)
			}
		}()
	}
	wg.Wait()
	for r, rec := range recs {
		steps := rec.Steps()
		if len(steps) != 4 {
			t.Fatalf("run %d: %d steps", r, len(steps))
		}
		for k, s := range steps {
			if s.N != k+1 || s.Run != string(rune('a'+r)) {
				t.Errorf("run %d step %d: %d %s", r, k, s.N, s.Run)
			}
		}
	}
}

// TestKeyStaysHome: the real key goes to the configured upstream only; a
// redirect is not followed; an unknown run is refused; a call that is not
// a model call passes through and is no step.
func TestKeyStaysHome(t *testing.T) {
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere = append(elsewhere, r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"))
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	g, err := Start(Options{Upstreams: map[Wire]Upstream{WireAnthropic: {BaseURL: redirector.URL, APIKey: "real-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rec := &MemRecorder{}
	run, _ := g.NewRun(RunConfig{Recorder: rec})
	status, body := post(t, run, "/v1/messages", WireAnthropic, []byte(`{"model":"m","messages":[]}`))
	if status != http.StatusBadGateway || !strings.Contains(string(body), "redirected") || len(elsewhere) != 0 {
		t.Errorf("redirect: %d %s; elsewhere got %v", status, body, elsewhere)
	}
	if s := rec.Steps(); len(s) != 1 || s[0].Status != http.StatusBadGateway || s[0].Error == "" {
		t.Errorf("steps %+v", s)
	}
	// No key configured: the run's key does not go up either,
	// in whichever header it came.
	plain, err := Start(Options{Upstreams: map[Wire]Upstream{WireAnthropic: {BaseURL: other.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	run3, _ := plain.NewRun(RunConfig{})
	req3, _ := http.NewRequest(http.MethodPost, run3.URL()+"/v1/messages", strings.NewReader(`{}`))
	req3.Header.Set("X-Api-Key", run3.Key())
	req3.Header.Set("Authorization", "Bearer "+run3.Key())
	if resp, err := http.DefaultClient.Do(req3); err == nil {
		resp.Body.Close()
	}
	if len(elsewhere) != 1 || elsewhere[0] != "" {
		t.Errorf("the upstream got keys %q", elsewhere)
	}
	if status, _ := post(t, plainURL(g.URL()), "/v1/messages", WireAnthropic, []byte(`{}`)); status != http.StatusUnauthorized {
		t.Errorf("no run's key: %d", status)
	}
	if _, err := Start(Options{Addr: "0.0.0.0:0"}); err == nil {
		t.Error("listened beyond loopback")
	}

	e := newEnv(t)
	rec2 := &MemRecorder{}
	run2, _ := e.g.NewRun(RunConfig{Recorder: rec2})
	req, _ := http.NewRequest(http.MethodGet, run2.URL()+"/v1/models", nil)
	req.Header.Set("X-Api-Key", run2.Key())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := e.ms.Requests()
	if resp.StatusCode != 200 || len(rec2.Steps()) != 0 || len(reqs) != 1 || reqs[0].Path != "/v1/models" || reqs[0].Header.Get("X-Api-Key") != "real-key" {
		t.Errorf("models: %d, %d steps, upstream %+v", resp.StatusCode, len(rec2.Steps()), reqs)
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct{ base, sub, want string }{
		{"https://api.anthropic.com", "/v1/messages", "https://api.anthropic.com/v1/messages?beta=true"},
		{"https://api.openai.com/v1", "/v1/responses", "https://api.openai.com/v1/responses?beta=true"},
		{"https://api.openai.com/v1/", "/chat/completions", "https://api.openai.com/v1/chat/completions?beta=true"},
		{"http://127.0.0.1:9/x", "//evil.example/v1/messages", "http://127.0.0.1:9/x/evil.example/v1/messages?beta=true"},
		{"https://h", "/../../etc", "https://h/etc?beta=true"},
	} {
		u, err := target(tc.base, tc.sub, "beta=true")
		if err != nil || u.String() != tc.want {
			t.Errorf("%s + %s = %v %v, want %s", tc.base, tc.sub, u, err, tc.want)
		}
	}
}

// TestStreamsAsItArrives: each event reaches the agent when the upstream
// sends it, not at the end of the answer.
func TestStreamsAsItArrives(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) { streamsAsItArrives(t, c) })
	}
}

func streamsAsItArrives(t *testing.T, c *cli) {
	e := newEnv(t)
	r := *c.main[0].Reply
	r.Text += " And a few more words, so that it streams in several pieces."
	r.ChunkDelay = 60 * time.Millisecond
	e.ms.Push(r)
	run, _ := e.g.NewRun(RunConfig{})
	req, _ := http.NewRequest(http.MethodPost, run.URL()+c.main[0].Path, bytes.NewReader(c.main[0].Body))
	setKey(req, c.wire, run.Key())
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	io.Copy(io.Discard, br)
	total := time.Since(start)
	if first > total/3 || total < 300*time.Millisecond {
		t.Errorf("first event after %v, whole answer %v", first, total)
	}
}

// answerParts reads an assembled answer: its text, its thinking, and its
// first tool call's name and arguments.
func answerParts(t *testing.T, wire Wire, answer []byte) (text, thinking, name, args string) {
	t.Helper()
	switch wire {
	case WireAnthropic:
		var a struct {
			Content []struct {
				Type, Text, Thinking, Name string
				Input                      json.RawMessage
			}
		}
		if err := json.Unmarshal(answer, &a); err != nil {
			t.Fatal(err)
		}
		for _, b := range a.Content {
			switch b.Type {
			case "text":
				text += b.Text
			case "thinking":
				thinking += b.Thinking
			case "tool_use":
				if name == "" {
					name, args = b.Name, string(b.Input)
				}
			}
		}
	case WireChat:
		var a struct {
			Choices []struct {
				Message struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(answer, &a); err != nil || len(a.Choices) != 1 {
			t.Fatalf("%v: %s", err, answer)
		}
		m := a.Choices[0].Message
		text, thinking = m.Content, m.ReasoningContent
		if len(m.ToolCalls) > 0 {
			name, args = m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments
		}
	case WireGemini:
		var a struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text         string
						Thought      bool
						FunctionCall *struct {
							Name string
							Args json.RawMessage
						}
					}
				}
			}
		}
		if err := json.Unmarshal(answer, &a); err != nil || len(a.Candidates) != 1 {
			t.Fatalf("%v: %s", err, answer)
		}
		for _, p := range a.Candidates[0].Content.Parts {
			switch {
			case p.FunctionCall != nil:
				if name == "" {
					name, args = p.FunctionCall.Name, string(p.FunctionCall.Args)
				}
			case p.Thought:
				thinking += p.Text
			default:
				text += p.Text
			}
		}
	case WireResponses:
		var a struct {
			Output []struct {
				Type, Name, Arguments string
				Content               []struct{ Text string }
				Summary               []struct{ Text string }
			}
		}
		if err := json.Unmarshal(answer, &a); err != nil {
			t.Fatal(err)
		}
		for _, o := range a.Output {
			switch o.Type {
			case "message":
				for _, c := range o.Content {
					text += c.Text
				}
			case "reasoning":
				for _, c := range o.Summary {
					thinking += c.Text
				}
			case "function_call":
				if name == "" {
					name, args = o.Name, o.Arguments
				}
			}
		}
	}
	return
}

// TestUpstreamCut: an answer the upstream breaks off is taped with why, and
// the agent sees it broken off too.
func TestUpstreamCut(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		t.Run(c.name, func(t *testing.T) { upstreamCut(t, c) })
	}
}

func upstreamCut(t *testing.T, c *cli) {
	e := newEnv(t)
	r := *c.main[1].Reply
	r.Fault = &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 4}
	e.ms.Push(r)
	rec := &MemRecorder{}
	run, _ := e.g.NewRun(RunConfig{Recorder: rec})
	req, _ := http.NewRequest(http.MethodPost, run.URL()+c.main[1].Path, bytes.NewReader(c.main[1].Body))
	setKey(req, c.wire, run.Key())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Error("the agent got a whole answer")
	}
	steps := rec.Steps()
	if len(steps) != 1 || steps[0].Error == "" || steps[0].Answer != nil || len(steps[0].Events) != 4 {
		t.Errorf("steps %+v", steps)
	}
}

// TestUpstreamEventOverTheBound: an upstream event bigger than the bound
// fails the model call as soon as it passes it: the agent gets the events
// before it, then an error event saying why, then a cut stream, never the
// big event; the step says why; and the gateway does not hold the event.
// Not parallel: it measures the process's allocations.
func TestUpstreamEventOverTheBound(t *testing.T) {
	const limit = 1 << 20
	const huge = 64 << 20
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for sent := 0; sent < huge; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the gateway hung up
			}
		}
		io.WriteString(w, "\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	g, err := Start(Options{Upstreams: map[Wire]Upstream{WireAnthropic: {BaseURL: up.URL}}, MaxEventBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rec := &MemRecorder{}
	run, _ := g.NewRun(RunConfig{Recorder: rec})

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest(http.MethodPost, run.URL()+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	setKey(req, WireAnthropic, run.Key())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Error("the stream ended cleanly: the agent would take it as a whole answer")
	}
	want := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n" +
		"event: error\ndata: {\"error\":{\"message\":\"tine replay gateway: the upstream sent an event larger than 1 MB (the limit)\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n"
	if string(got) != want {
		t.Errorf("the agent got %d bytes:\n%.300s\nwant\n%s", len(got), got, want)
	}
	steps := rec.Steps()
	if len(steps) != 1 || steps[0].Error != "upstream stream: an event larger than 1 MB (the limit)" || len(steps[0].Events) != 1 || steps[0].Answer != nil {
		t.Errorf("steps %+v", steps)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16*limit {
		t.Errorf("allocated %d bytes while the upstream sent a %d-byte event", n, huge)
	}
}

func TestSSEReader(t *testing.T) {
	in := ": comment\r\n\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\ndata: line1\ndata: line2\n\ndata: [DONE]\n\ndata: partial"
	sr := newSSEReader(strings.NewReader(in), 0)
	var got []Event
	var raw strings.Builder
	for {
		b, ev, ok, err := sr.next()
		raw.Write(b)
		if ok {
			got = append(got, ev)
		}
		if err != nil {
			break
		}
	}
	want := []Event{{"a", `{"x":1}`}, {"", "line1\nline2"}, {"", "[DONE]"}, {"", "partial"}}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
	if raw.String() != in {
		t.Errorf("raw bytes not passed on as they came")
	}
}

// TestGatewayRefusesRequestsWithoutTheRunsKey: a run's URL carries no
// secret (it is on an agent's command line, which every user of the
// machine can read: rule 13 in ARCHITECTURE.md); a request to it without
// the run's key, or with another key, is refused, never forwarded with
// the real key nor recorded, a model call or not.
func TestGatewayRefusesRequestsWithoutTheRunsKey(t *testing.T) {
	e := newEnv(t)
	rec := &MemRecorder{}
	run, err := e.g.NewRun(RunConfig{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"from nobody"}]}`)
	gemini := "/v1beta/models/m:streamGenerateContent"
	for _, tc := range []struct{ name, header, value, query string }{
		{"no key", "", "", ""},
		{"another x-api-key", "X-Api-Key", "tine-not-this-run", ""},
		{"another x-goog-api-key", "X-Goog-Api-Key", "tine-not-this-run", ""},
		{"another bearer", "Authorization", "Bearer tine-not-this-run", ""},
		// A key in the URL opens nothing, the run's own either.
		{"the run's key in the query", "", "", "?alt=sse&key=" + run.Key()},
	} {
		for _, p := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", gemini, "/v1/models"} {
			req, _ := http.NewRequest(http.MethodPost, run.URL()+p+tc.query, bytes.NewReader(body))
			if p == "/v1/models" {
				req, _ = http.NewRequest(http.MethodGet, run.URL()+p+tc.query, nil)
			}
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s, %s: %d %s", tc.name, p, resp.StatusCode, b)
			}
			if p == gemini && !strings.Contains(string(b), `"UNAUTHENTICATED"`) {
				t.Errorf("%s: not the Gemini API's refusal: %s", tc.name, b)
			}
		}
	}
	if n := len(e.ms.Requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	if n := len(rec.Steps()); n != 0 {
		t.Errorf("%d steps recorded", n)
	}
	// With its key, in any of the three headers, the run's calls go
	// through, and the upstream gets the real key.
	if s, b := post(t, run, "/v1/messages", WireAnthropic, body); s != http.StatusOK {
		t.Errorf("x-api-key: %d %s", s, b)
	}
	if s, b := post(t, run, "/v1/chat/completions", WireChat, body); s != http.StatusOK {
		t.Errorf("bearer: %d %s", s, b)
	}
	gbody := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if s, b := post(t, run, "/v1beta/models/m:generateContent", WireGemini, gbody); s != http.StatusOK {
		t.Errorf("x-goog-api-key: %d %s", s, b)
	}
	for _, r := range e.ms.Requests() {
		if got := r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key") + r.Header.Get("Authorization"); got != "real-key" && got != "Bearer real-key" {
			t.Errorf("the upstream got key %q", got)
		}
	}
	if n := len(rec.Steps()); n != 3 {
		t.Errorf("%d steps recorded", n)
	}
	if !strings.HasPrefix(run.Key(), KeyPrefix) || strings.Contains(run.URL(), run.Key()) || strings.Contains(run.cfg.ID, run.Key()) {
		t.Errorf("key %q, URL %q, ID %q", run.Key(), run.URL(), run.cfg.ID)
	}
	// Once closed, its key opens nothing.
	run.Close()
	if s, _ := post(t, run, "/v1/messages", WireAnthropic, body); s != http.StatusUnauthorized {
		t.Errorf("a closed run's key: %d", s)
	}
}

// TestServeUnix: a sandbox reaches the gateway through a Unix socket of
// its trial's, in a folder only this user enters; a request through it
// needs its run's key like any other, and stop removes socket and folder.
func TestServeUnix(t *testing.T) {
	e := newEnv(t)
	run, err := e.g.NewRun(RunConfig{Recorder: &MemRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	path, stop, err := e.g.ServeUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the socket's folder: %v %v", st, err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	for key, want := range map[string]int{run.Key(): http.StatusOK, "": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/messages", bytes.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
	stop()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("the socket's folder is left: %v", err)
	}
	stop() // twice is once
}
