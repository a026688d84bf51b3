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
