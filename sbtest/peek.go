package sbtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/heapq"
)

// PeekMessages returns up to maxMessageCount messages without locking them, in
// sequence-number order, from options.FromSequenceNumber or else from just after the last
// message this receiver peeked (as the SDK does). It sees every message of the subqueue
// whatever its state: available, locked, deferred, scheduled. Peeked messages carry no
// lock token. Cost is O(n log maxMessageCount) in the subqueue's size n: peek is for
// tests, not hot paths. maxMessageCount <= 0 returns ErrInvalidArgument.
func (r *Receiver) PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return r.peek(ctx, maxMessageCount, options, 0)
}

// peek is PeekMessages whose messages, when limit > 0, stop before their sizes (as the
// entity counts them) add up to more than limit bytes, at least one, so that a peek
// copies only what its answer can hold.
func (r *Receiver) peek(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions, limit int) ([]*azservicebus.ReceivedMessage, error) {
	if maxMessageCount <= 0 {
		return nil, fmt.Errorf("%w: maxMessageCount %d", ErrInvalidArgument, maxMessageCount)
	}
	if _, err := r.begin(ctx, OpReceive); err != nil {
		return nil, err
	}
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	from, cursor := r.lastPeeked+1, true
	if options != nil && options.FromSequenceNumber != nil {
		from, cursor = *options.FromSequenceNumber, false
	}
	if r.sessLost {
		return nil, errLockLost()
	}
	out := collect(r.sq, from, maxMessageCount, r.sees, limit)
	for _, rm := range out {
		rm.LockToken = [16]byte{}
		rm.LockedUntil = nil
		if m := r.sq.bySeq[*rm.SequenceNumber]; m != nil && m.p.ttl == nil && !m.touched {
			// "Message expiration (Time to Live)": without a message TTL, expires-at-utc
			// is computed on the receive/peek-lock path, not on the peek path: until then
			// peek shows the default, the maximum.
			rm.TimeToLive = ptr(sbkit.MaxTTL)
			rm.ExpiresAt = cloneTime(sbkit.ExpiresAt(m.enqueued, sbkit.MaxTTL))
		}
	}
	if cursor && len(out) > 0 {
		r.lastPeeked = *out[len(out)-1].SequenceNumber
	}
	return out, nil
}

// collect returns copies of the messages of sq with seq >= from that pass keep, by
// sequence number, at most max of them (all when max < 0), and when limit > 0 only those
// whose sizes add up to at most limit bytes, at least one. Called with the entity's lock.
// With a max it keeps the max lowest in a heap while it walks the subqueue, so that a
// page of a long queue costs O(n log max), not a sort of everything after from.
func collect(sq *subqueue, from int64, max int, keep func(*message) bool, limit int) []*azservicebus.ReceivedMessage {
	var ms []*message
	if max < 0 {
		for seq, m := range sq.bySeq {
			if seq >= from && keep(m) {
				ms = append(ms, m)
			}
		}
	} else if max > 0 {
		highest := heapq.New(func(a, b *message) bool { return a.seq > b.seq }, func(*message, int) {})
		for seq, m := range sq.bySeq {
			if seq < from || !keep(m) {
				continue
			}
			if highest.Len() < max {
				highest.Push(m)
			} else if top, _ := highest.Peek(); seq < top.seq {
				highest.Pop()
				highest.Push(m)
			}
		}
		for highest.Len() > 0 {
			ms = append(ms, highest.Pop())
		}
	}
	slices.SortFunc(ms, func(a, b *message) int { return int(a.seq - b.seq) })
	out := make([]*azservicebus.ReceivedMessage, 0, len(ms))
	size := 0
	for _, m := range ms {
		if size += m.p.size; limit > 0 && len(out) > 0 && size > limit {
			break
		}
		out = append(out, m.received())
	}
	return out
}
