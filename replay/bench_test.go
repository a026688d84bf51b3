package replay

import (
	"testing"
)

type discard struct{}

func (discard) Record(Step) error { return nil }

// The gateway's added latency per step: the same streamed model call (Claude
// Code's third request, 50 kB, answered by the scripted server) straight to
// the upstream, through a recording run, and answered from a tape.
func BenchmarkStepDirect(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	for b.Loop() {
		post(b, e.ms.URL(), c.main[2].Path, c.wire, c.main[2].Body)
	}
}

func BenchmarkStepRecord(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	run, _ := e.g.NewRun(RunConfig{Recorder: discard{}})
	for b.Loop() {
		post(b, run.URL(), c.main[2].Path, c.wire, c.main[2].Body)
	}
}

func BenchmarkStepReplay(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	tape, _ := e.record(b, c)
	for b.Loop() {
		b.StopTimer()
		run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 3, Recorder: discard{}})
		run.Prepare()
		b.StartTimer()
		// One step: the third, checked and answered from the tape (the
		// first two are answered too; measured per step below).
		for _, fx := range c.main {
			post(b, run.URL(), fx.Path, c.wire, fx.Body)
		}
		b.StopTimer()
		run.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/3/1e6, "ms/step")
}

// BenchmarkCompare is the check of one request (Claude Code's third, 50 kB).
func BenchmarkCompare(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	body := []byte(c.main[2].Body)
	for b.Loop() {
		if Compare(c.wire, body, body) != nil {
			b.Fatal("diverged")
		}
	}
}

// BenchmarkNormalize is one request's normalisation (Claude Code's third).
func BenchmarkNormalize(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	body := []byte(c.main[2].Body)
	for b.Loop() {
		if _, err := Normalize(c.wire, body); err != nil {
			b.Fatal(err)
		}
	}
}
