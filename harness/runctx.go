package harness

import "context"

type runKey struct{}

// WithRun marks ctx as carrying a turn of run id, so that what runs below
// the harness (the model APIs' recording transport) knows whose model call
// it is carrying.
func WithRun(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runKey{}, id)
}

// RunOf is the run whose turn ctx carries (WithRun); ok is false outside a
// turn.
func RunOf(ctx context.Context) (id string, ok bool) {
	id, ok = ctx.Value(runKey{}).(string)
	return id, ok
}
