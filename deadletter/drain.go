package deadletter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// drainOptions are the options [Purge] and [ExportAndComplete] share with [Redrive].
type drainOptions struct {
	filter      *Filter
	max         int
	pageSize    int
	idle        time.Duration
	maxHeld     int
	shutdown    time.Duration
	settle      time.Duration
	prog        progress
	concurrency int
	noSettle    bool // the receiver is in receive-and-delete mode
}

// drain receives pages from src until it is empty, holds the messages the filter skips
// (abandoned at the end), hands each page's matching messages to handle, and completes
// those handle returned no error for (a fatal error of handle fails the whole page and
// ends the drain) (a message received in receive-and-delete mode,
// which has no lock token, is already gone). It returns the Stats and why it stopped,
// with ctx's error when ctx ended. The Stats count Moved for completed messages and
// Failed for those handle or the complete failed; a failed message is held like a
// skipped one.
func drain(ctx context.Context, src Receiver, o drainOptions, handle func(ctx context.Context, page []*azservicebus.ReceivedMessage) ([]error, error)) (Stats, error) {
	start := time.Now()
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopTimer := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(o.shutdown, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopTimer()

	var st Stats
	held := map[int64]*azservicebus.ReceivedMessage{}
	settle := func(ms []*azservicebus.ReceivedMessage, complete bool) []error {
		errs := make([]error, len(ms))
		sem := make(chan struct{}, o.concurrency)
		var wg sync.WaitGroup
		for i, m := range ms {
			if o.noSettle || m.LockToken == ([16]byte{}) {
				continue // received in receive-and-delete mode: nothing to settle
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				work, cancel := context.WithTimeout(work, o.settle)
				defer cancel()
				if complete {
					errs[i] = src.CompleteMessage(work, m, nil)
				} else {
					_ = src.AbandonMessage(work, m, nil)
				}
			}()
		}
		wg.Wait()
		return errs
	}
	finish := func(reason StopReason, err error) (Stats, error) {
		rest := make([]*azservicebus.ReceivedMessage, 0, len(held))
		for _, m := range held {
			rest = append(rest, m)
		}
		settle(rest, false)
		if len(rest) > 0 {
			graceWait(work)
		}
		st.Stopped = reason
		st.Elapsed = time.Since(start)
		o.prog.report(ctx, st)
		if err == nil && reason == StopCancelled {
			err = ctx.Err()
		}
		return st, err
	}
	for {
		switch {
		case ctx.Err() != nil:
			return finish(StopCancelled, nil)
		case o.max > 0 && st.Moved+st.Failed >= int64(o.max):
			return finish(StopMaxMessages, nil)
		case len(held) >= o.maxHeld:
			return finish(StopHoldLimit, nil)
		}
		n := o.pageSize
		if o.max > 0 && int64(o.max)-(st.Moved+st.Failed) < int64(n) {
			n = int(int64(o.max) - (st.Moved + st.Failed))
		}
		rctx, cancel := context.WithTimeout(ctx, o.idle)
		msgs, err := src.ReceiveMessages(rctx, n, nil)
		idle := rctx.Err() != nil
		cancel()
		var matched []*azservicebus.ReceivedMessage
		fresh := 0
		for _, m := range msgs {
			if m.SequenceNumber == nil {
				settle([]*azservicebus.ReceivedMessage{m}, false)
				continue
			}
			seq := *m.SequenceNumber
			if _, ok := held[seq]; ok {
				held[seq] = m // it came back: hold the new delivery
				continue
			}
			fresh++
			st.Seen++
			if !o.filter.Matches(m) {
				st.Skipped++
				held[seq] = m
				continue
			}
			matched = append(matched, m)
		}
		if len(matched) > 0 {
			herrs, fatal := handle(work, matched)
			if fatal != nil {
				// Nothing of this page is completed: hold it, to be abandoned.
				for _, m := range matched {
					st.Failed++
					held[*m.SequenceNumber] = m
				}
				st.addError(fatal)
				return finish(StopError, fatal)
			}
			var ok []*azservicebus.ReceivedMessage
			for i, m := range matched {
				if herrs[i] != nil {
					st.Failed++
					st.addError(fmt.Errorf("message %q (sequence number %d): %w", m.MessageID, *m.SequenceNumber, herrs[i]))
					held[*m.SequenceNumber] = m
					continue
				}
				ok = append(ok, m)
			}
			cerrs := settle(ok, true)
			for i, m := range ok {
				if cerrs[i] != nil {
					st.Failed++
					st.addError(fmt.Errorf("message %q (sequence number %d): complete: %w", m.MessageID, *m.SequenceNumber, cerrs[i]))
					held[*m.SequenceNumber] = m // not counted again if it comes back
					continue
				}
				st.Moved++
			}
		}
		st.Elapsed = time.Since(start)
		o.prog.report(ctx, st)
		switch {
		case len(msgs) > 0 && fresh == 0 && len(msgs) < n:
			return finish(StopAllSeen, nil)
		case len(msgs) > 0:
			if err != nil && !idle {
				return finish(StopError, fmt.Errorf("deadletter: receive: %w", err))
			}
		case ctx.Err() != nil:
			return finish(StopCancelled, nil)
		case err != nil && !idle:
			return finish(StopError, fmt.Errorf("deadletter: receive: %w", err))
		default:
			return finish(StopDrained, nil)
		}
	}
}
