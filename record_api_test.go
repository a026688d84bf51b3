package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// TestRecordAPIForksAsTheirTapes: with --record, every model call of an
// openai or anthropic turn is stored as a step of the run's tape, through
// the harness's own HTTP transport: a retried call is two steps, a later
// turn's steps come after the first's, the answer is assembled from the
// stream, and the API key is nowhere on the tape. Without --record there
// is no tape.
func TestRecordAPIForksAsTheirTapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		harness string
		wire    replay.Wire
		path    string
	}{
		{"openai", replay.WireChat, "/v1/chat/completions"},
		{"anthropic", replay.WireAnthropic, "/v1/messages"},
	} {
		t.Run(c.harness, func(t *testing.T) {
			t.Parallel()
			srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {}})
			require.NoError(t, err)
			defer srv.Close()
			const key = "sk-recorded-never-0123456789"
			srv.Push(
				modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "0"}},
				modelserver.Reply{Text: "Paris: 18C.", Match: &modelserver.Match{Contains: "first turn"}},
				modelserver.Reply{Text: "Still Paris.", Match: &modelserver.Match{Contains: "second turn"}},
				modelserver.Reply{Text: "Unrecorded.", Match: &modelserver.Match{Contains: "no record"}},
			)
			db, id := importSeed(t)
			api := []string{"--base-url", srv.URL() + "/v1", "--api-key", key}
			out, errOut, code := tine(t, db, append([]string{"fork", id, "--name", "rec", "-m", "first turn", "--harness", c.harness,
				"--model", "test-model", "--record", "--wait", "--json"}, api...)...)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			out, errOut, code = tine(t, db, append([]string{"run", "rec", "-m", "second turn", "--record", "--wait"}, api...)...)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			out, errOut, code = tine(t, db, append([]string{"fork", id, "--name", "plain", "-m", "no record", "--harness", c.harness,
				"--model", "test-model", "--wait"}, api...)...)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)

			st, err := store.Open(db)
			require.NoError(t, err)
			defer st.Close()
			ctx := context.Background()
			fork, err := st.Resolve(ctx, "rec")
			require.NoError(t, err)
			tape, err := st.Tape(ctx, fork.ID)
			require.NoError(t, err)
			require.Len(t, tape, 3, "the first turn's call and its retry, then the second turn's")
			var steps []replay.Step
			for i, ts := range tape {
				assert.Equal(t, i+1, ts.Step)
				require.NotNil(t, ts.Request)
				assert.NotContains(t, *ts.Request, key)
				assert.NotContains(t, ts.Response, key)
				var s replay.Step
				require.NoError(t, json.Unmarshal([]byte(ts.Response), &s))
				assert.Equal(t, i+1, s.N)
				assert.Equal(t, fork.ID, s.Run)
				assert.Equal(t, c.wire, s.Wire)
				assert.Equal(t, c.path, s.Path)
				assert.Equal(t, replay.FromUpstream, s.Source)
				assert.Empty(t, s.Error)
				assert.JSONEq(t, *ts.Request, string(s.Request))
				steps = append(steps, s)
			}
			assert.Equal(t, 429, steps[0].Status, "the rate-limited try is a step of its own")
			assert.Nil(t, steps[0].Answer)
			for _, s := range steps[1:] {
				assert.Equal(t, 200, s.Status)
				assert.True(t, s.Stream)
				assert.NotEmpty(t, s.Events)
			}
			assert.Contains(t, string(steps[1].Request), "first turn")
			assert.Contains(t, string(steps[1].Answer), "Paris: 18C.", "the answer assembled from the stream")
			assert.Contains(t, string(steps[2].Request), "second turn")
			assert.Contains(t, string(steps[2].Answer), "Still Paris.")
			assert.True(t, strings.Contains(string(steps[2].Request), "Paris: 18C."), "the second turn sends the first's answer")

			plain, err := st.Resolve(ctx, "plain")
			require.NoError(t, err)
			tape, err = st.Tape(ctx, plain.ID)
			require.NoError(t, err)
			assert.Empty(t, tape, "no --record, no tape")
			// The API got the real key on every call.
			for _, r := range srv.ModelRequests() {
				assert.Contains(t, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), key)
			}
		})
	}
}

// TestRecordAPIInTheBackground: TINE_RECORD=1 records too, and a fork
// whose turn runs in a background tine is recorded there.
func TestRecordAPIInTheBackground(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {}})
	require.NoError(t, err)
	defer srv.Close()
	srv.Push(modelserver.Reply{Text: "From the background."})
	db, id := importSeed(t)
	out, errOut, code := asShell([]string{"TINE_RECORD=1"}).tine(t, db, "fork", id, "--name", "bg", "-m", "in the background", "--harness", "openai",
		"--model", "test-model", "--base-url", srv.URL()+"/v1", "--api-key", "sk-bg")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	var tape []model.TapeStep
	require.Eventually(t, func() bool {
		r, err := st.Resolve(ctx, "bg")
		if err != nil || r.Status != model.Completed {
			return false
		}
		tape, err = st.Tape(ctx, r.ID)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the detached process ran the turn")
	require.Len(t, tape, 1)
	assert.Contains(t, *tape[0].Request, "in the background")
	assert.Contains(t, tape[0].Response, "From the background.")
}
