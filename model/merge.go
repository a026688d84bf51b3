package model

import "time"

// Merge is one merge (tine merge): run RunID got a turn whose prompt
// carries what Forks learned, in that order (a best-of-N winner first).
// At is the run's length when the turn began, so the merge's prompt is
// its message At+1 (absolute index At).
type Merge struct {
	ID        int64
	RunID     string
	At        int
	Forks     []string
	CreatedAt time.Time
}
