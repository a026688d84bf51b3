package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/httpapi"
	"tine/internal/modelserver"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// served is a real `tine serve`, started by startServe, and a client of
// it: every answer it reads is checked against the OpenAPI document the
// server serves.
type served struct {
	t         *testing.T
	url       string
	token     string
	tokenPath string
	// out is what it printed before it served.
	out string
	cmd *exec.Cmd
}

// openAPIValidator checks requests and answers against httpapi.OpenAPI,
// with a maintained validator library (not tine's own reading of it).
var openAPIValidator = sync.OnceValues(func() (validator.Validator, error) {
	doc, err := libopenapi.NewDocument(httpapi.OpenAPI)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%v", errs)
	}
	return v, nil
})

// startServe starts `tine --db DB serve --listen 127.0.0.1:0 ARGS` (the
// test binary as tine) with env added, and reads where it listens.
func startServe(t *testing.T, db string, args []string, env ...string) *served {
	t.Helper()
	return asShell(env).serve(t, db, args)
}

// serve is startServe in sh.
func (sh shellEnv) serve(t *testing.T, db string, args []string) *served {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--db", db, "serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(slices.Clip([]string(sh)), "TINE_TEST_AS_TINE=1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("tine serve did not stop on SIGINT within 30 s")
		}
	})
	s := &served{t: t, cmd: cmd}
	lines := bufio.NewScanner(stdout)
	var out strings.Builder
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.url = m[1]
		}
		if strings.HasPrefix(lines.Text(), "try: curl") {
			break
		}
	}
	s.out = out.String()
	require.NotEmpty(t, s.url, "tine serve said where it listens:\n%s\n%s", s.out, stderr.String())
	go io.Copy(io.Discard, stdout)
	s.tokenPath = db + "-token"
	b, err := os.ReadFile(s.tokenPath)
	require.NoError(t, err)
	s.token = strings.TrimSpace(string(b))
	return s
}

// request makes a request of the server with the token.
func (s *served) request(method, path string, body any) *http.Request {
	s.t.Helper()
	var r io.Reader = http.NoBody
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(s.t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// send sends req and returns the answer's status and body; the answer
// is checked against the OpenAPI document, and so is the request when
// valid says it is one the document describes.
func (s *served) send(req *http.Request, valid bool) (int, []byte) {
	s.t.Helper()
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	v, err := openAPIValidator()
	require.NoError(s.t, err)
	check, _ := http.NewRequest(req.Method, req.URL.String(), bytes.NewReader(reqBody))
	check.Header = req.Header.Clone()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var ok bool
	var errs []string
	if valid {
		ok, errs = toErrs(v.ValidateHttpRequestResponse(check, resp))
	} else {
		ok, errs = toErrs(v.ValidateHttpResponse(check, resp))
	}
	assert.True(s.t, ok, "%s %s → %d %s: the answer is not what the OpenAPI document says: %v", req.Method, req.URL.Path, resp.StatusCode, trimmed(body), errs)
	return resp.StatusCode, body
}

// call sends a request the document describes, with the token.
func (s *served) call(method, path string, body any) (int, []byte) {
	s.t.Helper()
	return s.send(s.request(method, path, body), true)
}

// into calls and decodes a 200 answer into v.
func (s *served) into(method, path string, body, v any) {
	s.t.Helper()
	code, out := s.call(method, path, body)
	require.Equal(s.t, http.StatusOK, code, "%s %s: %s", method, path, out)
	require.NoError(s.t, json.Unmarshal(out, v), string(out))
}

// refused says a request was answered with status and error code.
func (s *served) refused(status int, code string, got int, body []byte) {
	s.t.Helper()
	assert.Equal(s.t, status, got, string(body))
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(s.t, json.Unmarshal(body, &e), string(body))
	assert.Equal(s.t, code, e.Error.Code, e.Error.Message)
	assert.NotEmpty(s.t, e.Error.Message)
	assert.NotContains(s.t, e.Error.Message, "\n", "one line")
}

// toErrs reads a validation's errors as text.
func toErrs[E interface{ Error() string }](ok bool, errs []E) (bool, []string) {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return ok, out
}

func trimmed(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// TestServeIsSecureByDefault: tine serve listens on loopback only unless
// told; every request needs the token, made on the first start, kept 0600
// beside the database and shown that once; a Host header that does not
// name the server is refused (DNS rebinding); no other origin may read an
// answer unless allowed; a body over the bound is refused.
func TestServeIsSecureByDefault(t *testing.T) {
	t.Parallel()
	db, _ := importSeed(t)
	s := startServe(t, db, nil)
	assert.Regexp(t, `token: [0-9a-f]{64}\n\(shown this once; it is kept in `+regexp.QuoteMeta(s.tokenPath)+`, mode 0600\)`, s.out)
	assert.Contains(t, s.out, `try: curl -H "Authorization: Bearer `+s.token+`" `+s.url+`/api/runs`)
	info, err := os.Stat(s.tokenPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.Contains(t, s.url, "http://127.0.0.1:")

	for _, auth := range []string{"", "Bearer wrong", "Basic " + s.token, "Bearer " + s.token[:63], s.token} {
		req := s.request("GET", "/api/runs", nil)
		req.Header.Set("Authorization", auth)
		code, body := s.send(req, false)
		s.refused(http.StatusUnauthorized, "unauthorized", code, body)
	}
	req := s.request("GET", "/api/runs", nil)
	req.Header.Del("Authorization")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, `Bearer realm="tine"`, resp.Header.Get("WWW-Authenticate"))
	req = s.request("GET", "/api/runs", nil)
	req.Header.Set("Authorization", "bearer "+s.token)
	code, body := s.send(req, true)
	assert.Equal(t, http.StatusOK, code, "the scheme's case is free: %s", body)

	// A page of another site whose name a DNS rebinding points here.
	port := s.url[strings.LastIndex(s.url, ":"):]
	for host, want := range map[string]int{"evil.example" + port: http.StatusForbidden, "evil.example": http.StatusForbidden,
		"localhost" + port: http.StatusOK, "127.0.0.1" + port: http.StatusOK} {
		req := s.request("GET", "/api/runs", nil)
		req.Host = host
		code, body := s.send(req, want == http.StatusOK)
		assert.Equal(t, want, code, "Host %s: %s", host, body)
		if want != http.StatusOK {
			s.refused(want, "forbidden_host", code, body)
		}
	}

	// No CORS: another origin's page gets no leave to read, and its
	// preflight is refused.
	req = s.request("GET", "/api/runs", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	pre, err := http.NewRequest("OPTIONS", s.url+"/api/runs", nil)
	require.NoError(t, err)
	pre.Header.Set("Origin", "https://evil.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, err = http.DefaultClient.Do(pre)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	// A body over the bound (1 MiB).
	huge := `{"message": "` + strings.Repeat("x", 2<<20) + `"}`
	code, body = s.send(s.request("POST", "/api/runs/whatever/fork", huge), false)
	s.refused(http.StatusRequestEntityTooLarge, "too_large", code, body)

	// Started again: the token is the same and not shown again.
	s.cmd.Process.Signal(syscall.SIGINT)
	s.cmd.Wait()
	again := startServe(t, db, nil)
	assert.Equal(t, s.token, again.token)
	assert.NotContains(t, again.out, s.token, "shown once only")
	assert.Contains(t, again.out, "token: in "+s.tokenPath)
	assert.Contains(t, again.out, `try: curl -H "Authorization: Bearer $(cat `+s.tokenPath+`)" `+again.url+`/api/runs`)
	require.NoError(t, os.Chmod(s.tokenPath, 0o644))
	_, errOut, code2 := tine(t, db, "serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, 1, code2)
	assert.Contains(t, errOut, "may be read by others (mode 0644)", "a token others can read is refused")
	require.NoError(t, os.Chmod(s.tokenPath, 0o600))

	// Beyond loopback only when told, with a warning; an allowed origin.
	_, errOut, code2 = tine(t, db, "serve", "--listen", "0.0.0.0:0")
	assert.Equal(t, 2, code2)
	assert.Contains(t, errOut, "--public")
	cors := startServe(t, db, []string{"--cors", "https://ok.example"})
	req = cors.request("GET", "/api/runs", nil)
	req.Header.Set("Origin", "https://ok.example")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "https://ok.example", resp.Header.Get("Access-Control-Allow-Origin"))
	pre, err = http.NewRequest("OPTIONS", cors.url+"/api/runs", nil)
	require.NoError(t, err)
	pre.Header.Set("Origin", "https://ok.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, err = http.DefaultClient.Do(pre)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Authorization")
}

// TestServePublicWarns: --public listens beyond loopback, saying on
// stderr what guards it then.
func TestServePublicWarns(t *testing.T) {
	t.Parallel()
	db, _ := importSeed(t)
	cmd := exec.Command(os.Args[0], "--db", db, "serve", "--listen", "0.0.0.0:0", "--public")
	cmd.Env = append(os.Environ(), "TINE_TEST_AS_TINE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "try:") {
	}
	cmd.Process.Signal(syscall.SIGINT)
	require.NoError(t, cmd.Wait())
	assert.Contains(t, stderr.String(), "other machines reach: the token is all that guards tine there")
	assert.Contains(t, stderr.String(), "in clear text")
}

// TestServeEndpoints drives every endpoint of a real tine serve over
// loopback, on a tree of script forks (parent, and its forks a and b),
// and every error status: each answer is the service's, as the command
// line's --json gives it, and what the OpenAPI document says.
func TestServeEndpoints(t *testing.T) {
	t.Parallel()
	db := scriptTree(t)
	s := startServe(t, db, nil)
	seedRun, _ := messagesOf(t, db, "parent")
	seed := seedRun.ParentID
	v, err := openAPIValidator()
	require.NoError(t, err)
	ok, docErrs := v.ValidateDocument()
	assert.True(t, ok, "the document is OpenAPI 3.1: %v", docErrs)
	var doc map[string]any
	s.into("GET", "/api/openapi.json", nil, &doc)
	assert.Equal(t, "3.1.0", doc["openapi"])

	// Reads.
	var runs []runJSON
	s.into("GET", "/api/runs", nil, &runs)
	want, _, _ := tine(t, db, "ls", "--json")
	var wantRuns []runJSON
	require.NoError(t, json.Unmarshal([]byte(want), &wantRuns))
	assert.Equal(t, wantRuns, runs, "what tine ls --json says")
	var shown map[string]any
	s.into("GET", "/api/runs/parent", nil, &shown)
	assert.Equal(t, seedRun.ID, shown["id"])
	assert.Len(t, shown["messages"], 8)
	var cps service.Checkpoints
	s.into("GET", "/api/runs/"+seed+"/checkpoints", nil, &cps)
	assert.Equal(t, []int{1, 5, 6}, cps.Checkpoints)
	var found service.Search
	s.into("GET", "/api/search?q=paris&limit=1", nil, &found)
	assert.Len(t, found.Hits, 1)
	assert.True(t, found.More)
	var cmp service.Comparison
	s.into("GET", "/api/compare?run=a&run=b", nil, &cmp)
	require.Len(t, cmp.Runs, 2)
	assert.Equal(t, 8, cmp.ForkPoint)

	// Forks, as the seeds have them: the cut snapped down, the forks
	// settled within wait_seconds.
	var forked service.ForkStatus
	s.into("POST", "/api/runs/"+seed+"/fork", map[string]any{"n": 2, "messages": []string{"Only Paris", "Only Rome"},
		"names": []string{"h-a", "h-b"}, "continue_from": 3, "harness": "script", "wait_seconds": 60}, &forked)
	require.Len(t, forked.Forks, 2)
	assert.Equal(t, "forked", forked.Status)
	assert.Nil(t, forked.Divergence)
	assert.Equal(t, []string{forked.Forks[0].ID, forked.Forks[1].ID}, forked.TrialIDs)
	for _, f := range forked.Forks {
		assert.Equal(t, "completed", f.Status, f.Error)
		assert.Equal(t, 1, f.ForkedFromMessageIndex, "snapped down from 3")
		assert.Equal(t, seed, f.ForkedFromRunID)
		assert.Equal(t, "mid tool batch", f.Snapped)
	}
	var status service.ForkStatus
	s.into("GET", "/api/forks/h-b", nil, &status)
	assert.Equal(t, forked.TrialIDs, status.TrialIDs)
	// A session by its name; no message: made only.
	s.into("POST", "/api/sessions/parent/fork", map[string]any{"names": []string{"lazy"}}, &forked)
	require.Len(t, forked.Forks, 1)
	assert.Equal(t, "pending", forked.Forks[0].Status)
	assert.Equal(t, 8, forked.Forks[0].ForkedFromMessageIndex)

	// Continue: a fork tine made goes on itself; another run's turn goes
	// to a new fork at its end; fork and regenerate make a fork.
	var cont service.Forks
	s.into("POST", "/api/runs/h-a/continue", map[string]any{"message": "and Oslo?", "wait_seconds": 60}, &cont)
	require.Len(t, cont.Forks, 1)
	assert.Equal(t, forked.Forks[0].ID != cont.Forks[0].ID, true)
	assert.Equal(t, "h-a", cont.Forks[0].Name)
	assert.Equal(t, "completed", cont.Forks[0].Status, cont.Forks[0].Error)
	assert.Equal(t, 5, cont.Forks[0].Messages)
	s.into("POST", "/api/runs/"+seed+"/continue", map[string]any{"input": "and now?", "harness": "script", "wait_seconds": 60}, &cont)
	assert.NotEqual(t, seed, cont.Forks[0].ID, "an imported session is never written to")
	assert.Equal(t, 6, cont.Forks[0].ForkedFromMessageIndex)
	s.into("POST", "/api/runs/h-a/continue", map[string]any{"message": "from the top", "continue_from": "1", "fork": true, "wait_seconds": 60}, &cont)
	assert.Equal(t, 1, cont.Forks[0].ForkedFromMessageIndex)
	assert.Equal(t, "completed", cont.Forks[0].Status)
	s.into("POST", "/api/runs/h-a/continue", map[string]any{"regenerate": true, "replace_original": true, "wait_seconds": 60}, &cont)
	assert.Equal(t, 4, cont.Forks[0].ForkedFromMessageIndex, "after h-a's last prompt, and Oslo?")
	var hidden []runJSON
	s.into("GET", "/api/runs?all=true", nil, &hidden)
	for _, r := range hidden {
		if r.Name == "h-a" {
			assert.True(t, r.Hidden, "replace_original hid it")
		}
	}

	// Cancel, retry.
	var cancelled service.Cancelled
	s.into("POST", "/api/runs/lazy/cancel", nil, &cancelled)
	assert.Equal(t, "pending", cancelled.Was)
	assert.Equal(t, "cancelled", cancelled.Status)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	hb, err := st.Resolve(context.Background(), "h-b")
	require.NoError(t, err)
	require.NoError(t, st.SetStatus(context.Background(), hb.ID, model.Failed, "a test failed it"))
	var retried service.Forks
	s.into("POST", "/api/runs/h-b/retry", map[string]any{"wait_seconds": 60}, &retried)
	require.Len(t, retried.Forks, 1)
	assert.Equal(t, "h-b-retry", retried.Forks[0].Name)
	assert.Equal(t, "completed", retried.Forks[0].Status, retried.Forks[0].Error)

	// Merge: the message only, then the parent's turn.
	var dry service.DryRun
	s.into("POST", "/api/merges", map[string]any{"forks": []string{"a", "b"}, "dry_run": true}, &dry)
	assert.Equal(t, seedRun.ID, dry.Run)
	assert.Contains(t, dry.Message, `Fork "a"`)
	var merged service.Merge
	s.into("POST", "/api/merges", map[string]any{"forks": []string{"a", "b"}, "summary": "both tried", "wait_seconds": 60}, &merged)
	assert.Equal(t, seedRun.ID, merged.Merge.Run)
	assert.Equal(t, "completed", merged.Forks[0].Status, merged.Forks[0].Error)

	// Import and gc.
	abs, err := filepath.Abs("testdata/openai/chat.jsonl")
	require.NoError(t, err)
	var sum struct {
		Runs   int      `json:"runs"`
		RunIDs []string `json:"run_ids"`
	}
	s.into("POST", "/api/import", map[string]any{"paths": []string{abs}}, &sum)
	assert.Equal(t, 1, sum.Runs)
	var gc service.GC
	s.into("POST", "/api/gc", map[string]any{"dry_run": true, "tapes_older_than": "30d"}, &gc)
	assert.True(t, gc.DryRun)

	// Every error status.
	code, body := s.call("GET", "/api/runs/no-such-run", nil)
	s.refused(http.StatusNotFound, "not_found", code, body)
	code, body = s.call("GET", "/api/forks/"+seed, nil)
	s.refused(http.StatusNotFound, "not_found", code, body)
	code, body = s.send(s.request("POST", "/api/runs/parent/fork", `{"n": 2,`), false)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.send(s.request("POST", "/api/runs/parent/fork", `{"n": 2, "nope": true}`), false)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.send(s.request("POST", "/api/runs/parent/fork", `{"n": 11}`), false)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.call("POST", "/api/runs/parent/fork", map[string]any{"continue_from": "eleventy"})
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.send(s.request("POST", "/api/runs/parent/fork", `{"wait_seconds": -1}`), false)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.send(s.request("GET", "/api/search?q=paris&limit=many", nil), false)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.call("GET", "/api/compare?run=a", nil)
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.call("POST", "/api/gc", map[string]any{"tapes_older_than": "soon"})
	s.refused(http.StatusBadRequest, "invalid", code, body)
	code, body = s.call("POST", "/api/runs/parent/fork", map[string]any{"continue_from": 0})
	s.refused(http.StatusConflict, "conflict", code, body)
	assert.Contains(t, string(body), "nothing to fork")
	code, body = s.call("POST", "/api/runs/parent/fork", map[string]any{"names": []string{"a"}})
	s.refused(http.StatusConflict, "conflict", code, body)
	require.NoError(t, st.SetRunning(context.Background(), seedRun.ID))
	code, body = s.call("POST", "/api/runs/parent/fork", map[string]any{"message": "now"})
	s.refused(http.StatusConflict, "conflict", code, body)
	assert.Contains(t, string(body), "in the middle of a turn")
	code, body = s.call("POST", "/api/runs/parent/continue", map[string]any{"message": "now"})
	s.refused(http.StatusConflict, "conflict", code, body)
	code, body = s.call("POST", "/api/merges", map[string]any{"forks": []string{"a"}})
	s.refused(http.StatusConflict, "conflict", code, body)
	require.NoError(t, st.SetStatus(context.Background(), seedRun.ID, model.Completed, ""))
	code, body = s.call("POST", "/api/runs/a/apply", nil)
	s.refused(http.StatusConflict, "conflict", code, body)
	assert.Contains(t, string(body), "no worktree")
	code, body = s.call("POST", "/api/runs/parent/fork", map[string]any{"harness": "claude", "message": "go", "on": "docker", "image": "x"})
	assert.Contains(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, code, string(body))
	// A run with no model gateway path: unreplayed, nothing made.
	s.into("POST", "/api/runs/"+seed+"/fork", map[string]any{"at_seq": 1, "continuations": 0}, &status)
	assert.Equal(t, "unreplayed", status.Status)
	assert.Nil(t, status.Fork)
	assert.Contains(t, status.Reason, "no gateway path for openai")
	code, body = s.call("POST", "/api/runs/"+seed+"/fork", map[string]any{"at_seq": 1, "message": "no"})
	s.refused(http.StatusBadRequest, "invalid", code, body)
	resp, err := http.DefaultClient.Do(s.request("GET", "/api/nowhere", nil))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	s.refused(http.StatusNotFound, "not_found", resp.StatusCode, body)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	kind string
	data []byte
}

// follow reads GET /api/events?query as it comes, until the test ends.
func (s *served) follow(query string) <-chan sseEvent {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	req := s.request("GET", "/api/events?"+query, nil).WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode)
	require.Equal(s.t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseEvent, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = []byte(strings.TrimPrefix(line, "data: "))
			case line == "" && ev.kind != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch
}

// TestServeEventsFollowAFork: a client following a tree's events sees a
// fork made through the API appear, its messages as they are stored, and
// its turn end.
func TestServeEventsFollowAFork(t *testing.T) {
	t.Parallel()
	db, seed := importSeed(t)
	s := startServe(t, db, nil)
	events := s.follow("tree=" + seed)
	code, body := s.call("GET", "/api/events?run=no-such-run-at-all", nil)
	s.refused(http.StatusNotFound, "not_found", code, body)
	var forked service.ForkStatus
	s.into("POST", "/api/runs/"+seed+"/fork", map[string]any{"message": "Only Paris, please", "harness": "script", "names": []string{"live"}}, &forked)
	id := forked.Forks[0].ID
	var texts []string
	deadline := time.After(30 * time.Second)
	// The run's events come before its messages' of the same look.
	for done := false; !done || len(texts) < 2; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the stream ended")
			switch ev.kind {
			case "run":
				var r httpapi.RunEvent
				require.NoError(t, json.Unmarshal(ev.data, &r))
				if r.Run == id && r.Status == "completed" {
					assert.Equal(t, 8, r.Messages)
					done = true
				}
			case "message":
				var m httpapi.MessageEvent
				require.NoError(t, json.Unmarshal(ev.data, &m))
				if m.Run == id {
					texts = append(texts, fmt.Sprintf("%d %s %s", m.Message.K, m.Message.Role, m.Message.Parts[0].Text))
				}
			}
		case <-deadline:
			t.Fatalf("no event said the fork completed; messages seen: %v", texts)
		}
	}
	require.NotEmpty(t, texts)
	assert.Equal(t, "7 user Only Paris, please", texts[0])
	assert.Contains(t, texts[len(texts)-1], "8 assistant ")
}

// TestServeRefusesForksBeyondItsQueue: with --queue 1, a fork whose turn
// would be a second one waiting or running is refused with 429 (and
// Retry-After) before anything is made; a fork made only (no message)
// needs no room; once the turn ended there is room again.
func TestServeRefusesForksBeyondItsQueue(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {}})
	require.NoError(t, err)
	defer srv.Close()
	srv.Push(modelserver.Reply{Text: "one two three four five six seven eight nine ten", ChunkDelay: 200 * time.Millisecond})
	db, seed := importSeed(t)
	s := startServe(t, db, []string{"--queue", "1", "--parallel", "1"},
		"OPENAI_BASE_URL="+srv.URL()+"/v1", "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model")
	fork := map[string]any{"message": "slowly", "harness": "openai"}
	var first service.ForkStatus
	s.into("POST", "/api/runs/"+seed+"/fork", fork, &first)
	require.Len(t, first.Forks, 1)
	assert.Equal(t, "running", first.Forks[0].Status)
	req := s.request("POST", "/api/runs/"+seed+"/fork", fork)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.refused(http.StatusTooManyRequests, "busy", resp.StatusCode, body)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	var runs []runJSON
	s.into("GET", "/api/runs", nil, &runs)
	assert.Len(t, runs, 2, "nothing was made for the refused fork")
	var lazy service.ForkStatus
	s.into("POST", "/api/runs/"+seed+"/fork", map[string]any{"harness": "openai"}, &lazy)
	assert.Equal(t, "pending", lazy.Forks[0].Status)
	var cont service.Forks
	code, body := s.call("POST", "/api/runs/"+lazy.Forks[0].ID+"/continue", map[string]any{"message": "quick"})
	s.refused(http.StatusTooManyRequests, "busy", code, body)
	// Once the first turn has ended there is room again; wait_seconds
	// answers once the turn settled.
	deadline := time.Now().Add(60 * time.Second)
	for first.Forks[0].Status != "completed" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		s.into("GET", "/api/forks/"+first.Forks[0].ID, nil, &first)
	}
	require.Equal(t, "completed", first.Forks[0].Status, first.Forks[0].Error)
	s.into("POST", "/api/runs/"+lazy.Forks[0].ID+"/continue", map[string]any{"message": "quick", "wait_seconds": 60}, &cont)
	assert.Equal(t, "completed", cont.Forks[0].Status, cont.Forks[0].Error)
	assert.Equal(t, 8, cont.Forks[0].Messages)
}
