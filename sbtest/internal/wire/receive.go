package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// receiverLink is a link on which the client receives from a queue, a subscription or a
// dead-letter queue, or from a session of one (setupSession), through the model's
// Receiver. The fields set at attach are read-only afterwards; the others are guarded
// by mu.
type receiverLink struct {
	outLink
	rcv     Receiver        // set at attach (for a session, once accepted)
	sr      SessionReceiver // a session's receiver; rcv is its Receiver
	settled bool            // deliveries are sent settled (receive-and-delete)

	iterCancel context.CancelFunc // ends the receive loop's wait, for a drain
	ready      bool               // attached and set up; credit may start the receive loop
	looping    bool               // the receive loop runs (only while there is credit, a drain or messages on their way)

	// What is on its way (see receiveLoop).
	grants   []creditGrant // credit granted, on its way to the service
	line     []lineBatch   // messages taken, on their way to the client
	reserved uint32        // the messages in line, whose credit they will use
}

func (l *receiverLink) kind() string { return "receive" }

// setup refuses an attach without a source, from an entity the client may not receive
// from or that does not exist, or from a queue or subscription that requires sessions,
// and otherwise makes the link's Receiver.
func (l *receiverLink) setup(a *amqp.Attach) *amqp.Error {
	if a.Source == nil {
		return protoError(condInvalidField, "attach without a source")
	}
	if err := l.authorize(); err != nil {
		return err
	}
	ns := l.s.c.srv.broker
	mode := l.receiveMode(a)
	rcv, err := newEntityReceiver(ns, l.addr, mode)
	if err != nil {
		return protoError(condNotFound, "%v", err)
	}
	if path, sub := splitSubQueue(l.addr); sub == 0 {
		if e, _ := ns.Entity(path); e.RequiresSession {
			_ = rcv.Close(context.Background())
			return amqpErrorFor(modelerr.NonSessionReceiver())
		}
	}
	l.rcv = rcv
	l.s.c.registerReceiveLink(l)
	return nil
}

// receiveMode reads the receive mode of a receiving link: pre-settled deliveries
// (snd-settle-mode settled) are receive-and-delete; otherwise the client settles every
// delivery (peek-lock), confirmed by the server in rcv-settle-mode second.
func (l *receiverLink) receiveMode(a *amqp.Attach) azservicebus.ReceiveMode {
	mode := azservicebus.ReceiveModePeekLock
	if a.SndSettleMode != nil && *a.SndSettleMode == amqp.SenderSettleSettled {
		mode = azservicebus.ReceiveModeReceiveAndDelete
	}
	l.settled = mode == azservicebus.ReceiveModeReceiveAndDelete
	return mode
}

// newEntityReceiver makes a sbtest receiver for a receive address: "queue",
// "topic/Subscriptions/sub", either followed by "/$DeadLetterQueue" or
// "/$Transfer/$DeadLetterQueue".
func newEntityReceiver(ns Broker, addr string, mode azservicebus.ReceiveMode) (Receiver, error) {
	path, sub := splitSubQueue(addr)
	return ns.ReceiverAt(path, mode, sub)
}

// start lets credit start the receive loop, and starts it for credit that came with or
// before the attach's answer.
func (l *receiverLink) start() {
	l.mu.Lock()
	l.ready = true
	l.startLoopLocked()
	l.mu.Unlock()
}

// release closes the link's Receiver, which releases its locks as a dropped connection
// does, and forgets its unsettled deliveries.
func (l *receiverLink) release() {
	if l.rcv != nil {
		_ = l.rcv.Close(context.Background())
		l.s.c.unregisterReceiveLink(l)
	}
	l.s.forgetLink(l)
}

func (l *receiverLink) entityDeleted() context.Context { return l.rcv.Deleted() }

// onFlow takes the client's credit and drain requests: a drain ends the receive loop's
// wait, and credit starts the loop when it is not running.
func (l *receiverLink) onFlow(f *amqp.Flow) {
	l.flow(f, func(old uint32) {
		l.grantLocked(old)
		if f.Drain && l.iterCancel != nil {
			l.iterCancel()
		}
		l.startLoopLocked()
	})
}

// startLoopLocked starts the receive loop of a link that is set up and has credit or a
// drain pending, unless it runs. A link runs a goroutine only while it has something to
// deliver: idle links cost memory, not goroutines.
// Called with l.mu held.
func (l *receiverLink) startLoopLocked() {
	if l.ready && !l.looping && !l.detached && (l.credit > 0 || l.drain) {
		l.looping = true
		l.s.c.goWork("receive loop", l.receiveLoop)
	}
}

// receiveLoop feeds a receiving link: while the client gives credit it takes messages
// from the entity through the model's Receiver and sends each as a delivery, unsettled
// in peek-lock mode (tagged with its lock token) and settled in receive-and-delete mode.
// A drain request sends what is available at once and then spends the rest of the
// credit. It runs only while the link has credit, a drain pending or messages on their
// way (onFlow starts it).
//
// The latency model's round trip is spent on the way there and back, as a network
// does, and every flow and transfer is on its way at once: credit a flow grants is
// usable half a round trip after the flow arrived (it reaches the service), and the
// messages taken for it are sent half a round trip after they were taken (they reach the
// client), while later credit is served meanwhile. The service sends messages on a
// link whenever it has both credit and messages (AMQP 1.0 part 2.6.7, "Flow Control":
// the sender may send as long as link-credit is above zero), not one batch of credit
// per round trip.
func (l *receiverLink) receiveLoop() {
	for {
		st, ok := l.nextStep()
		if !ok {
			return
		}
		switch {
		case st.due != nil:
			l.deliverAll(st.due.msgs)
		case st.drain:
			l.flushLine()
			l.mu.Lock()
			credit := l.credit
			l.mu.Unlock()
			l.deliverAll(l.rcv.TryReceive(int(min(credit, 1<<20))))
			l.mu.Lock()
			l.grants = nil // a drain spends all the credit
			l.mu.Unlock()
			l.completeDrain()
		case st.usable > 0:
			if !l.take(st) {
				return
			}
		default:
			l.pause(st)
		}
	}
}

// loopStep is what the receive loop does next: send the batch due, answer a drain,
// take messages for the usable credit, or wait until wait (the next credit or batch
// due; zero for none) or a flow.
type loopStep struct {
	due    *lineBatch
	drain  bool
	usable uint32
	wait   time.Time
	wake   <-chan struct{}
}

// lineBatch is messages taken for a link's credit, on their way to the client until
// due.
type lineBatch struct {
	due  time.Time
	msgs []*azservicebus.ReceivedMessage
}

// creditGrant is credit a flow granted that is on its way to the service until due.
type creditGrant struct {
	n   uint32
	due time.Time
}

// nextStep returns the receive loop's next step, or false when the link has no credit,
// no drain and nothing on its way (or went away, when what was on its way is released):
// then the receive loop ends, and the next flow that grants credit starts a new one.
func (l *receiverLink) nextStep() (loopStep, bool) {
	l.mu.Lock()
	now := time.Now()
	if l.detached || l.ctx.Err() != nil {
		l.looping = false
		line := l.line
		l.line, l.reserved = nil, 0
		l.mu.Unlock()
		for _, b := range line {
			l.deliverAll(b.msgs) // no longer deliverable: released
		}
		return loopStep{}, false
	}
	defer l.mu.Unlock()
	if len(l.line) > 0 && !l.line[0].due.After(now) {
		b := l.line[0]
		l.line = l.line[1:]
		l.reserved -= uint32(len(b.msgs))
		return loopStep{due: &b}, true
	}
	if l.drain {
		return loopStep{drain: true}, true
	}
	if l.credit == 0 && len(l.line) == 0 {
		l.looping = false
		return loopStep{}, false
	}
	st := loopStep{wake: l.wake}
	var pending uint32
	for len(l.grants) > 0 && !l.grants[0].due.After(now) {
		l.grants = l.grants[1:]
	}
	for _, g := range l.grants {
		pending += g.n
	}
	if len(l.grants) > 0 {
		st.wait = l.grants[0].due
	}
	if len(l.line) > 0 && (st.wait.IsZero() || l.line[0].due.Before(st.wait)) {
		st.wait = l.line[0].due
	}
	if l.credit > l.reserved+pending {
		st.usable = l.credit - l.reserved - pending
	}
	return st, true
}

// grantLocked records that a flow changed the link's credit from old to credit: credit
// granted is on its way for half a round trip; credit taken back is taken from what is
// still on its way first. Called with l.mu held.
func (l *receiverLink) grantLocked(old uint32) {
	if l.credit > old {
		if d := l.rcv.HalfRoundTrip(); d > 0 {
			l.grants = append(l.grants, creditGrant{n: l.credit - old, due: time.Now().Add(d)})
		}
		return
	}
	for cut := old - l.credit; cut > 0 && len(l.grants) > 0; {
		g := &l.grants[len(l.grants)-1]
		k := min(cut, g.n)
		g.n -= k
		cut -= k
		if g.n == 0 {
			l.grants = l.grants[:len(l.grants)-1]
		}
	}
}

// take waits for messages for st's usable credit (until st.wait, when a batch or
// credit falls due, or a drain), and puts those taken on their way. It returns false
// when the loop must end.
func (l *receiverLink) take(st loopStep) bool {
	ctx, cancel := l.ctx, context.CancelFunc(func() {})
	if !st.wait.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, st.wait)
	}
	ctx, cancelIter := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	l.iterCancel = cancelIter
	l.mu.Unlock()
	msgs, err := l.rcv.ReceiveNow(ctx, int(min(st.usable, 1<<20)))
	l.mu.Lock()
	l.iterCancel = nil
	l.mu.Unlock()
	cancelIter()
	if len(msgs) > 0 {
		l.mu.Lock()
		l.line = append(l.line, lineBatch{due: time.Now().Add(l.rcv.HalfRoundTrip()), msgs: msgs})
		l.reserved += uint32(len(msgs))
		l.mu.Unlock()
	}
	if err == nil || l.ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true // taken, link going away, a drain interrupted the wait, or something fell due
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeClosed {
		l.stopLoop()
		return false
	}
	// An injected receive fault: the service would detach the link; the SDK
	// recovers and attaches a new one.
	detachWithError(l, amqpErrorFor(err))
	l.stopLoop()
	return false
}

// pause waits until st.wait or a change of the link's credit.
func (l *receiverLink) pause(st loopStep) {
	var timeout <-chan time.Time
	if !st.wait.IsZero() {
		t := time.NewTimer(time.Until(st.wait))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-st.wake:
	case <-l.ctx.Done():
	}
}

// flushLine sends at once what is on its way (a drain answers after it).
func (l *receiverLink) flushLine() {
	l.mu.Lock()
	line := l.line
	l.line, l.reserved = nil, 0
	l.mu.Unlock()
	for _, b := range line {
		l.deliverAll(b.msgs)
	}
}

// stopLoop ends the receive loop of a link whose receiver is closed or that was
// detached: what is on its way is released.
func (l *receiverLink) stopLoop() {
	l.mu.Lock()
	l.looping = false
	line := l.line
	l.line, l.reserved = nil, 0
	l.mu.Unlock()
	for _, b := range line {
		for _, rm := range b.msgs {
			l.rcv.ReleaseLock(rm.LockToken)
		}
	}
}

// deliverAll sends msgs on the link. Messages that can no longer be sent (no credit
// left, link gone) are released so they are delivered again without their delivery
// counted.
func (l *receiverLink) deliverAll(msgs []*azservicebus.ReceivedMessage) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	for i, rm := range msgs {
		if !l.deliver(rm) {
			for _, rest := range msgs[i:] {
				l.rcv.ReleaseLock(rest.LockToken)
			}
			return
		}
	}
}

func (l *receiverLink) deliver(rm *azservicebus.ReceivedMessage) bool {
	if !l.takeCredit() {
		if !l.settled || l.isDetached() {
			return false
		}
		// Receive-and-delete: the message is already gone from the entity; deliver it
		// rather than lose it (the client only lowers credit when it stops reading).
	}
	payload, err := fromReceived(rm, !l.settled).MarshalBinary()
	if err != nil {
		l.log.Error("encoding a message failed", "err", err)
		return false
	}
	var tag []byte
	if l.settled {
		tag = make([]byte, 16)
		if rm.SequenceNumber != nil {
			binary.BigEndian.PutUint64(tag[8:], uint64(*rm.SequenceNumber))
		}
	} else {
		tag = deliveryTag(rm.LockToken)
	}
	return l.s.sendDelivery(l.ctx, &l.linkBase, tag, payload, l.settled, outDelivery{link: l, token: rm.LockToken})
}

// settle applies the client's outcome for a delivery of this link to the message holding
// token, in the disposition's turn (the round trip was slept before), and returns the
// state to confirm it with: the outcome itself, or rejected with the error
// (com.microsoft:message-lock-lost when the lock is gone).
//
// accepted completes; modified abandons, or defers when undeliverable-here is set, with
// the annotations as properties to modify; rejected dead-letters, with the
// DeadLetterReason and DeadLetterErrorDescription of the error's info (the rest of the
// info are properties to modify); released (and received) give the message back without
// counting the delivery. A modified outcome counts the delivery whatever its
// delivery-failed says, where AMQP 1.0 (part 3.4.5) counts only failed ones: the Go SDK
// abandons with modified{delivery-failed: false} and defers with
// modified{delivery-failed: false, undeliverable-here: true} (azservicebus
// messageSettler.go), and the service counts an abandoned delivery (SDK live test
// TestReceiver_SettleWithOnlyLockToken: redelivered with DeliveryCount 2).
func (l *receiverLink) settle(token [16]byte, state amqp.DeliveryState) amqp.DeliveryState {
	var err error
	switch s := state.(type) {
	case *amqp.Accepted:
		err = l.rcv.Complete(l.ctx, token)
	case *amqp.Modified:
		props := propsFromAnnotations(s.MessageAnnotations)
		if s.UndeliverableHere {
			err = l.rcv.DeferLock(l.ctx, token, props)
		} else {
			err = l.rcv.Abandon(l.ctx, token, props)
		}
	case *amqp.Rejected:
		err = l.rcv.DeadLetter(l.ctx, token, deadLetterOptions(s.Error))
	default: // released, received, or no state
		if !l.rcv.ReleaseLock(token) {
			err = modelerr.LockLost()
		}
	}
	if err != nil {
		return &amqp.Rejected{Error: amqpErrorFor(err)}
	}
	if _, ok := state.(*amqp.Rejected); ok {
		// Confirm a dead-lettering without the error: go-amqp reports a rejected state
		// that carries an error as a failed settlement.
		return &amqp.Rejected{}
	}
	return state
}

// deadLetterOptions reads the reason, description and properties to modify of a
// rejected outcome. The SDK sends com.microsoft:dead-letter with DeadLetterReason and
// DeadLetterErrorDescription in the info (empty strings when not given: they count as
// not set); another condition becomes the reason, its description the description.
func deadLetterOptions(e *amqp.Error) *azservicebus.DeadLetterOptions {
	o := &azservicebus.DeadLetterOptions{}
	if e == nil {
		return o
	}
	if e.Condition != condDeadLetter {
		o.Reason = to.Ptr(string(e.Condition))
		if e.Description != "" {
			o.ErrorDescription = to.Ptr(e.Description)
		}
	}
	for _, kv := range e.Info {
		k, ok := keyString(kv.Key)
		if !ok {
			continue
		}
		switch k {
		case propDLReason:
			if s, _ := kv.Value.(string); s != "" {
				o.Reason = &s
			}
		case propDLDescription:
			if s, _ := kv.Value.(string); s != "" {
				o.ErrorDescription = &s
			}
		default:
			if o.PropertiesToModify == nil {
				o.PropertiesToModify = map[string]any{}
			}
			o.PropertiesToModify[k] = kv.Value
		}
	}
	return o
}
