package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"tine/internal/service"
	"tine/model"
)

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/openapi.json", s.openAPI)
	m.HandleFunc("GET /api/runs", s.list)
	m.HandleFunc("GET /api/runs/{id}", s.show)
	m.HandleFunc("GET /api/runs/{id}/checkpoints", s.checkpoints)
	m.HandleFunc("POST /api/runs/{id}/fork", s.fork)
	m.HandleFunc("POST /api/sessions/{id}/fork", s.fork)
	m.HandleFunc("POST /api/runs/{id}/continue", s.continueRun)
	m.HandleFunc("POST /api/runs/{id}/retry", s.retry)
	m.HandleFunc("POST /api/runs/{id}/cancel", s.cancel)
	m.HandleFunc("POST /api/runs/{id}/apply", s.apply)
	m.HandleFunc("GET /api/forks/{id}", s.forkStatus)
	m.HandleFunc("GET /api/search", s.search)
	m.HandleFunc("GET /api/compare", s.compare)
	m.HandleFunc("POST /api/merges", s.merge)
	m.HandleFunc("POST /api/import", s.importFiles)
	m.HandleFunc("POST /api/gc", s.gc)
	m.HandleFunc("GET /api/events", s.events)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s (GET /api/openapi.json lists them)", r.Method, model.OneLine(r.URL.Path, 100)))
	})
}

// Budget is a budget as the API takes it.
type Budget struct {
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

func (b *Budget) model() model.Budget {
	if b == nil {
		return model.Budget{}
	}
	return model.Budget{Tokens: b.MaxTokens, USD: b.MaxCostUSD}
}

// Where is where forks run, as the API takes it.
type Where struct {
	On      string  `json:"on,omitempty"`
	Image   string  `json:"image,omitempty"`
	CPUs    float64 `json:"cpus,omitempty"`
	Memory  string  `json:"memory,omitempty"`
	Network string  `json:"network,omitempty"`
	Jobs    int     `json:"jobs,omitempty"`
}

func (p Where) opts() (model.PlaceOpts, error) {
	o := model.PlaceOpts{Image: p.Image, CPUs: p.CPUs, Network: p.Network, Jobs: p.Jobs}
	if p.Memory != "" {
		n, err := service.ParseSize(p.Memory)
		if err != nil {
			return o, &service.Error{Code: service.Invalid, Err: fmt.Errorf("memory: %w", err)}
		}
		o.MemoryBytes = n
	}
	return o, nil
}

// Boundary is continue_from: end, last_user, step:N, or K as a number or
// a numeric string.
type Boundary string

// UnmarshalJSON takes a string or an integer.
func (b *Boundary) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*b = Boundary(s)
		return nil
	}
	var k int
	if err := json.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("continue_from is end, last_user, step:N or a boundary K, not %s", model.OneLine(string(data), 40))
	}
	*b = Boundary(strconv.Itoa(k))
	return nil
}

// ForkBody is POST /api/runs/{id}/fork: forks at a boundary, or, with
// at_seq, the run's world rebuilt at that step and forked there.
type ForkBody struct {
	N               int      `json:"n,omitempty"`
	Message         string   `json:"message,omitempty"`
	Messages        []string `json:"messages,omitempty"`
	Names           []string `json:"names,omitempty"`
	ContinueFrom    Boundary `json:"continue_from,omitempty"`
	Harness         string   `json:"harness,omitempty"`
	Model           string   `json:"model,omitempty"`
	Regenerate      bool     `json:"regenerate,omitempty"`
	ReplaceOriginal bool     `json:"replace_original,omitempty"`
	Handoff         bool     `json:"handoff,omitempty"`
	InPlace         bool     `json:"in_place,omitempty"`
	Check           string   `json:"check,omitempty"`
	Score           string   `json:"score,omitempty"`
	Budget          *Budget  `json:"budget,omitempty"`
	Where
	// The replay at a step.
	AtSeq         *int    `json:"at_seq,omitempty"`
	Continuations *int    `json:"continuations,omitempty"`
	OnDivergence  string  `json:"on_divergence,omitempty"`
	Base          string  `json:"base,omitempty"`
	WaitSeconds   float64 `json:"wait_seconds,omitempty"`
}

// decodeWaiting reads a body (decode) that may say wait_seconds (secs,
// once it is read), and gives the answer the time to wait that long.
func (s *Server) decodeWaiting(w http.ResponseWriter, r *http.Request, v any, secs *float64) (time.Duration, bool) {
	if !decode(w, r, v) {
		return 0, false
	}
	wait, err := s.wait(*secs)
	if err != nil {
		fail(w, err)
		return 0, false
	}
	extendWrite(w, wait)
	return wait, true
}

// wait reads wait_seconds: how long to wait for the turns to settle.
func (s *Server) wait(secs float64) (time.Duration, error) {
	if secs < 0 || math.IsNaN(secs) || secs > s.opts.MaxWait.Seconds() {
		return 0, &service.Error{Code: service.Invalid, Err: fmt.Errorf("wait_seconds is 0 to %g, not %g", s.opts.MaxWait.Seconds(), secs)}
	}
	return time.Duration(secs * float64(time.Second)), nil
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var b ForkBody
	wait, ok := s.decodeWaiting(w, r, &b, &b.WaitSeconds)
	if !ok {
		return
	}
	ref := r.PathValue("id")
	if b.AtSeq != nil {
		s.replay(w, r, ref, b, wait)
		return
	}
	switch {
	case b.Continuations != nil || b.OnDivergence != "" || b.Base != "":
		fail(w, invalid("continuations, on_divergence and base go with at_seq: a replay of the run's tape to that step"))
		return
	case b.Message != "" && len(b.Messages) > 0:
		fail(w, invalid("give message or messages, not both"))
		return
	case b.Score != "" && b.Score != "exit" && b.Score != "number":
		fail(w, invalid(fmt.Sprintf("score is exit or number, not %q", b.Score)))
		return
	}
	place, err := b.opts()
	if err != nil {
		fail(w, err)
		return
	}
	msgs := b.Messages
	if b.Message != "" {
		msgs = []string{b.Message}
	}
	out, err := s.svc.Fork(r.Context(), service.ForkRequest{Run: ref, N: b.N, Messages: msgs, Names: b.Names,
		At: string(b.ContinueFrom), Harness: b.Harness, Model: b.Model, Regenerate: b.Regenerate, ReplaceOriginal: b.ReplaceOriginal,
		Handoff: b.Handoff, InPlace: b.InPlace, Check: b.Check, CheckNumber: b.Score == "number", Budget: b.Budget.model(),
		On: b.On, Place: place, How: service.How{WaitFor: wait}})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.Status())
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request, ref string, b ForkBody, wait time.Duration) {
	if b.N != 0 || b.Message != "" || len(b.Messages) > 0 || len(b.Names) > 0 || b.ContinueFrom != "" || b.Regenerate ||
		b.ReplaceOriginal || b.Harness != "" || b.Model != "" || b.Handoff || b.InPlace || b.Where != (Where{}) {
		fail(w, invalid("at_seq replays the run's tape to that step with the run's own agent: it takes continuations, on_divergence, base, check, score, budget and wait_seconds only"))
		return
	}
	k := 1
	if b.Continuations != nil {
		k = *b.Continuations
	}
	out, err := s.svc.Replay(r.Context(), service.ReplayRequest{Run: ref, AtStep: *b.AtSeq, Continuations: k,
		OnDivergence: b.OnDivergence, Base: b.Base, Check: b.Check, CheckNumber: b.Score == "number", Budget: b.Budget.model(),
		How: service.How{WaitFor: wait}})
	if err != nil {
		fail(w, err)
		return
	}
	st := service.ForkStatus{Replay: out.Replay, Forks: []service.Fork{}}
	if out.Fork != nil {
		if got, err := s.svc.ForkStatus(r.Context(), *out.Fork); err == nil {
			st.Forks = got.Forks
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// ContinueBody is POST /api/runs/{id}/continue: the run's next turn, or,
// with fork, regenerate or a continue_from other than end, a fork of it
// that gets the turn.
type ContinueBody struct {
	Message         string   `json:"message,omitempty"`
	Input           string   `json:"input,omitempty"`
	ContinueFrom    Boundary `json:"continue_from,omitempty"`
	Fork            bool     `json:"fork,omitempty"`
	Regenerate      bool     `json:"regenerate,omitempty"`
	ReplaceOriginal bool     `json:"replace_original,omitempty"`
	Harness         string   `json:"harness,omitempty"`
	Budget          *Budget  `json:"budget,omitempty"`
	Where
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
}

func (s *Server) continueRun(w http.ResponseWriter, r *http.Request) {
	var b ContinueBody
	wait, ok := s.decodeWaiting(w, r, &b, &b.WaitSeconds)
	if !ok {
		return
	}
	if b.Message != "" && b.Input != "" {
		fail(w, invalid("give message or input (the same), not both"))
		return
	}
	place, err := b.opts()
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.svc.Continue(r.Context(), service.ContinueRequest{Run: r.PathValue("id"), Message: b.Message + b.Input,
		Harness: b.Harness, Budget: b.Budget.model(), On: b.On, Place: place, ContinueFrom: string(b.ContinueFrom), Fork: b.Fork,
		Regenerate: b.Regenerate, ReplaceOriginal: b.ReplaceOriginal, How: service.How{WaitFor: wait}})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.JSON())
}

// WaitBody is a body that says only how long to wait.
type WaitBody struct {
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	var b WaitBody
	wait, ok := s.decodeWaiting(w, r, &b, &b.WaitSeconds)
	if !ok {
		return
	}
	out, err := s.svc.Retry(r.Context(), service.RetryRequest{Run: r.PathValue("id"), How: service.How{WaitFor: wait}})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.JSON())
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var b struct{}
	if !decode(w, r, &b) {
		return
	}
	extendWrite(w, service.CancelWait)
	out, err := s.svc.Cancel(r.Context(), []string{r.PathValue("id")}, service.CancelWait)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out[0])
}

// ApplyBody is POST /api/runs/{id}/apply.
type ApplyBody struct {
	Commit bool `json:"commit,omitempty"`
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	var b ApplyBody
	if !decode(w, r, &b) {
		return
	}
	out, err := s.svc.Apply(r.Context(), r.PathValue("id"), b.Commit)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	all, err := boolParam(r, "all")
	if err != nil {
		fail(w, err)
		return
	}
	l, err := s.svc.List(r.Context(), all)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l.JSON())
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.JSON())
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.Checkpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) forkStatus(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.ForkStatus(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, invalid(fmt.Sprintf("limit is how many messages to show, 1 or more, not %q", model.OneLine(v, 20))))
			return
		}
		limit = n
	}
	out, err := s.svc.Search(r.Context(), service.SearchRequest{Query: r.URL.Query().Get("q"), Limit: limit})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	diff, err := boolParam(r, "diff")
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.svc.Compare(r.Context(), r.URL.Query()["run"], diff)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// MergeBody is POST /api/merges.
type MergeBody struct {
	Forks       []string `json:"forks"`
	Into        string   `json:"into,omitempty"`
	Summary     string   `json:"summary,omitempty"`
	Summarize   bool     `json:"summarize,omitempty"`
	Apply       bool     `json:"apply,omitempty"`
	Commit      bool     `json:"commit,omitempty"`
	DryRun      bool     `json:"dry_run,omitempty"`
	WaitSeconds float64  `json:"wait_seconds,omitempty"`
}

func (s *Server) merge(w http.ResponseWriter, r *http.Request) {
	var b MergeBody
	wait, ok := s.decodeWaiting(w, r, &b, &b.WaitSeconds)
	if !ok {
		return
	}
	extendWrite(w, wait+s.opts.MaxWait) // --summarize's turns run first
	out, err := s.svc.Merge(r.Context(), service.MergeRequest{Forks: b.Forks, Into: b.Into, Note: b.Summary,
		Summarize: b.Summarize, Apply: b.Apply, Commit: b.Commit, DryRun: b.DryRun, How: service.How{WaitFor: wait}})
	switch {
	case err != nil:
		fail(w, err)
	case b.DryRun:
		writeJSON(w, http.StatusOK, out.DryRunJSON())
	default:
		writeJSON(w, http.StatusOK, out.JSON())
	}
}

// ImportBody is POST /api/import.
type ImportBody struct {
	Paths  []string `json:"paths,omitempty"`
	Format string   `json:"format,omitempty"`
}

func (s *Server) importFiles(w http.ResponseWriter, r *http.Request) {
	var b ImportBody
	if !decode(w, r, &b) {
		return
	}
	extendWrite(w, s.opts.MaxWait)
	out, err := s.svc.Import(r.Context(), service.ImportRequest{Paths: b.Paths, Format: b.Format})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// GCBody is POST /api/gc.
type GCBody struct {
	TapesOlderThan string `json:"tapes_older_than,omitempty"`
	DryRun         bool   `json:"dry_run,omitempty"`
}

func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	var b GCBody
	if !decode(w, r, &b) {
		return
	}
	age := 30 * 24 * time.Hour
	if b.TapesOlderThan != "" {
		a, err := service.ParseAge(b.TapesOlderThan)
		if err != nil {
			fail(w, invalid("tapes_older_than: "+err.Error()))
			return
		}
		age = a
	}
	extendWrite(w, s.opts.MaxWait)
	out, err := s.svc.GC(r.Context(), service.GCRequest{TapesOlderThan: age, DryRun: b.DryRun})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func invalid(msg string) error {
	return &service.Error{Code: service.Invalid, Err: fmt.Errorf("%s", msg)}
}

// boolParam reads query parameter name: absent, true or false.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid(fmt.Sprintf("%s is true or false, not %q", name, model.OneLine(v, 20)))
	}
	return b, nil
}

// extendWrite gives an answer that waits d longer than the server's
// write timeout to be written.
func extendWrite(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + time.Minute))
}
