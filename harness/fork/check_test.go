package fork_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"tine/harness/fork"
	"tine/model"
)

// TestPickBestTieBreaksOnTheTurnsTime: between forks that passed with as
// many tokens, the one whose turns took less wins, not the one made or
// finished last: a fork given a second turn an hour later did not take an
// hour.
func TestPickBestTieBreaksOnTheTurnsTime(t *testing.T) {
	t.Parallel()
	pass := 1.0
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	checked := &model.Check{Cmd: "true", Ran: true, Score: &pass}
	later := model.Run{ID: "later", CreatedAt: at, FinishedAt: at.Add(time.Hour), Worked: 8 * time.Second, Check: checked}
	slow := model.Run{ID: "slow", CreatedAt: at, FinishedAt: at.Add(40 * time.Second), Worked: 40 * time.Second, Check: checked}
	id, why := fork.PickBest([]model.Run{slow, later})
	assert.Equal(t, "later", id)
	assert.Equal(t, "2 passed with as many tokens; fastest (8s vs 40s)", why)
}

// TestPickBestCountsTheWholeBatch: the reason counts every fork of the
// batch, the ones whose check did not run (a failed turn, or one not run
// yet) too: one that passed of two, the other failed, is "the only fork
// of 2", not "of 1".
func TestPickBestCountsTheWholeBatch(t *testing.T) {
	t.Parallel()
	pass, fail := 1.0, 0.0
	passed := model.Run{ID: "passed", Status: model.Completed, Check: &model.Check{Cmd: "true", Ran: true, Score: &pass}}
	failedCheck := model.Run{ID: "failed-check", Status: model.Completed, Check: &model.Check{Cmd: "true", Ran: true, Exit: 1, Score: &fail}}
	failedTurn := model.Run{ID: "failed-turn", Status: model.Failed, Check: &model.Check{Cmd: "true"}}
	for batch, want := range map[string]struct {
		runs []model.Run
		why  string
	}{
		"alone":                      {[]model.Run{passed}, "its check passed"},
		"the other failed its check": {[]model.Run{passed, failedCheck}, "the only fork of 2 whose check passed"},
		"the other's turn failed":    {[]model.Run{failedTurn, passed}, "the only fork of 2 whose check passed (1 not checked)"},
		"three, one not checked":     {[]model.Run{failedCheck, passed, failedTurn}, "the only fork of 3 whose check passed (1 not checked)"},
	} {
		id, why := fork.PickBest(want.runs)
		assert.Equal(t, "passed", id, batch)
		assert.Equal(t, want.why, why, batch)
	}
}
