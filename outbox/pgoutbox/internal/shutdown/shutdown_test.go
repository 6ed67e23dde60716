package shutdown

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// ends records when a shutdown's cut and hard end came, and how often.
type ends struct {
	start time.Time
	mu    sync.Mutex
	cuts  []time.Duration
	hards []time.Duration
}

func newEnds() *ends { return &ends{start: time.Now()} }

func (e *ends) cut() {
	e.mu.Lock()
	e.cuts = append(e.cuts, time.Since(e.start))
	e.mu.Unlock()
}

func (e *ends) hard() {
	e.mu.Lock()
	e.hards = append(e.hards, time.Since(e.start))
	e.mu.Unlock()
}

// check fails t unless the cut came once at cut and the hard end once at hard (a
// negative time: never).
func (e *ends) check(t *testing.T, cut, hard time.Duration) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range []struct {
		name string
		got  []time.Duration
		want time.Duration
	}{{"cut", e.cuts, cut}, {"hard end", e.hards, hard}} {
		switch {
		case c.want < 0 && len(c.got) > 0:
			t.Errorf("%s at %v, want none", c.name, c.got)
		case c.want >= 0 && (len(c.got) != 1 || c.got[0] != c.want):
			t.Errorf("%s at %v, want once at %v", c.name, c.got, c.want)
		}
	}
}

// quarter is the receiver's reserve: a quarter of the time left, at most 1 s.
func quarter(left time.Duration) time.Duration { return max(0, min(left/4, time.Second)) }

// TestCutAndHard: the cut comes the reserve before a grace's deadline, the hard end at
// it, each once, however long the shutdown lasts afterwards.
func TestCutAndHard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		grace, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		d.Arm(grace)
		time.Sleep(time.Hour)
		e.check(t, 1500*time.Millisecond, 2*time.Second)
		d.Disarm()
	})
}

// TestLaterShorterDeadlineWins: a grace armed later with an earlier deadline (a Close
// with a short context during a shutdown with a long grace) brings both ends forward,
// and the first grace's deadline calls nothing more.
func TestLaterShorterDeadlineWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		long, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		d.Arm(long)
		time.Sleep(time.Second)
		short, cancel2 := context.WithTimeout(t.Context(), 2*time.Second) // ends at 3 s
		defer cancel2()
		d.Arm(short)
		time.Sleep(time.Hour)
		e.check(t, 2500*time.Millisecond, 3*time.Second)
		d.Disarm()
	})
}

// TestLaterLongerDeadlineChangesNothing: a grace that ends after the one armed already
// does not delay the shutdown.
func TestLaterLongerDeadlineChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		short, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		d.Arm(short)
		long, cancel2 := context.WithTimeout(t.Context(), time.Minute)
		defer cancel2()
		d.Arm(long)
		time.Sleep(time.Hour)
		e.check(t, 1500*time.Millisecond, 2*time.Second)
		d.Disarm()
	})
}

// TestGraceEndsEarly: a grace that ends before its deadline (cancelled), or that has no
// deadline, cuts and ends the shutdown at once.
func TestGraceEndsEarly(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			e := newEnds()
			d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
			grace, cancel := context.WithCancel(t.Context())
			if deadline {
				grace, cancel = context.WithTimeout(t.Context(), time.Minute)
			}
			d.Arm(grace)
			time.AfterFunc(5*time.Second, cancel)
			time.Sleep(time.Hour)
			e.check(t, 5*time.Second, 5*time.Second)
			d.Disarm()
		})
	}
}

// TestGraceNeverEnds: a grace that cannot end arms nothing: the shutdown waits for its
// work however long it takes.
func TestGraceNeverEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		d.Arm(context.Background())
		d.Arm(context.WithoutCancel(t.Context()))
		time.Sleep(time.Hour)
		e.check(t, -1, -1)
		d.Disarm()
	})
}

// TestHardAfterCut: with HardAfter the hard end comes that long after the cut, whichever
// grace brought the cut; Disarm before it stops it.
func TestHardAfterCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Hard: e.hard, HardAfter: time.Second})
		long, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		d.Arm(long)
		short, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel2()
		d.Arm(short)
		time.Sleep(time.Hour)
		e.check(t, 2*time.Second, 3*time.Second)
		d.Disarm()
	})
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Hard: e.hard, HardAfter: time.Second})
		grace, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		d.Arm(grace)
		time.Sleep(2500 * time.Millisecond)
		d.Disarm()
		time.Sleep(time.Hour)
		e.check(t, 2*time.Second, -1)
	})
}

// TestDisarm: after Disarm nothing is called in the hour that follows, not even for
// graces that end later or are armed afterwards; a cut running when Disarm is called is
// not waited for. The bubble ending (synctest fails on a goroutine blocked for good)
// shows that no goroutine of the shutdown is left behind.
func TestDisarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		grace, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		d.Arm(grace)
		time.Sleep(time.Second)
		d.Disarm()
		ended, cancel2 := context.WithCancel(t.Context())
		cancel2()
		d.Arm(ended)
		time.Sleep(time.Hour)
		e.check(t, -1, -1)
	})
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		cutting := make(chan struct{})
		d := New(Options{Cut: func() { close(cutting); <-release }})
		grace, cancel := context.WithCancel(t.Context())
		d.Arm(grace)
		cancel()
		<-cutting
		d.Disarm() // returns while the cut runs
		close(release)
	})
}

// TestConcurrentArms: graces armed from many goroutines while earlier ones end call
// each end once (run with -race).
func TestConcurrentArms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Cut: e.cut, Reserve: quarter, Hard: e.hard})
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 10 * time.Millisecond)
				grace, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				d.Arm(grace)
				time.Sleep(2 * time.Second)
			})
		}
		wg.Wait()
		e.check(t, 750*time.Millisecond, time.Second)
		d.Disarm()
	})
}

// TestGrace: Grace(d) ends d from now; a negative d never ends.
func TestGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		g, cancel := Grace(3 * time.Second)
		defer cancel()
		<-g.Done()
		if took := time.Since(start); took != 3*time.Second {
			t.Fatalf("Grace(3s) ended after %v", took)
		}
		g, cancel = Grace(0)
		defer cancel()
		if g.Err() == nil {
			t.Fatal("Grace(0) has not ended")
		}
		g, cancel = Grace(-1)
		defer cancel()
		if g.Done() != nil {
			t.Fatal("Grace(-1) can end, want a context that never ends")
		}
	})
}

// TestHardOnly: without Cut (the session run's closing of session receivers), the hard
// end comes at the earliest end of the graces armed, once.
func TestHardOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnds()
		d := New(Options{Hard: e.hard})
		long, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		d.Arm(long)
		short, cancel2 := context.WithTimeout(t.Context(), time.Second)
		defer cancel2()
		d.Arm(short)
		time.Sleep(2 * time.Hour)
		e.check(t, -1, time.Second)
		d.Disarm()
	})
}
