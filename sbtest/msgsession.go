package sbtest

import (
	"fmt"
	"slices"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/internal/heapq"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// session is one session of an entity that requires sessions, guarded by the entity's
// mutex. It exists while it has messages in the main queue, holds state, or is locked.
type session struct {
	id     string
	avail  msgHeap // the session's available messages by sequence number
	count  int     // messages of the main queue with this session id, in any state
	state  []byte
	holder *Receiver // the session receiver holding the lock, nil when unlocked
	// locked are the session's messages its holder has locked (Entity.lock, unlock), so
	// that releasing the session touches them only.
	locked      map[*message]struct{}
	lockedUntil time.Time
	readyIdx    int // its place in Entity.readySess, -1 when not there
	heldIdx     int // its place in Entity.heldSess, -1 when not there
}

// initSessions makes e group its messages by session. Every session operation costs
// O(log sessions): the unlocked sessions with available messages wait in a heap by their
// oldest message (AcceptNextSession takes the top), the locked ones in a heap by lock
// expiry (the expiries due are popped), and the available messages are counted.
func (e *Entity) initSessions() {
	e.sessions = make(map[string]*session)
	e.readySess = heapq.New(func(a, b *session) bool { return a.avail.top().seq < b.avail.top().seq },
		func(s *session, i int) { s.readyIdx = i })
	e.heldSess = heapq.New(func(a, b *session) bool { return a.lockedUntil.Before(b.lockedUntil) },
		func(s *session, i int) { s.heldIdx = i })
}

// reindexSession puts s where it belongs in the session indexes after its available
// messages, its lock or its lock expiry changed.
func (e *Entity) reindexSession(s *session) {
	place(e.readySess, s.readyIdx, s, s.holder == nil && s.avail.Len() > 0)
	place(e.heldSess, s.heldIdx, s, s.holder != nil)
}

// place puts s (at index i, -1 when absent) in h when in, else takes it out; a session
// that stays is fixed, since its key may have changed.
func place(h *heapq.Heap[*session], i int, s *session, in bool) {
	switch {
	case in && i < 0:
		h.Push(s)
	case in:
		h.Fix(i)
	case i >= 0:
		h.Remove(i)
	}
}

// The errors the service returns for session misuse: the SDK passes them through as
// *amqp.Error (go-amqp) without an azservicebus Code, so sbtest returns the same type.
func errSessionRequiredForSend() error {
	// Source: service error text, quoted in Azure/azure-sdk-for-python#738 (HTTP 405, amqp:not-allowed over AMQP).
	return &goamqp.Error{Condition: goamqp.ErrCondNotAllowed, Description: "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value."}
}

var errNonSessionReceiver = modelerr.NonSessionReceiver

func errSessionsNotSupported() error {
	// Source: service error text, quoted in danielgerlag/workflow-core#1217.
	return &goamqp.Error{Condition: goamqp.ErrCondNotAllowed, Description: "A sessionful message receiver cannot be created on an entity that does not require sessions. Ensure RequiresSession is set to true when creating a Queue or Subscription to enable sessionful behavior."}
}

// condSessionCannotBeLocked is what the service answers when a session is already locked.
const condSessionCannotBeLocked goamqp.ErrCond = "com.microsoft:session-cannot-be-locked"

func errSessionCannotBeLocked(id string) error {
	// Source: SDK live test TestSessionReceiver_acceptSessionButAlreadyLocked (condition and text).
	return &goamqp.Error{Condition: condSessionCannotBeLocked, Description: fmt.Sprintf("The requested session '%s' cannot be accepted. It may be locked by another receiver.", id)}
}

// sessionKey is the session a stored message belongs to.
func (m *message) sessionKey() string {
	if m.p.sessionID == nil {
		return ""
	}
	return *m.p.sessionID
}

// sessionFor returns the session m of sq belongs to, made on first use, or nil when sq
// does not group messages by session (an entity without sessions, a dead-letter queue).
func (e *Entity) sessionFor(sq *subqueue, m *message) *session {
	if e.sessions == nil || sq != &e.main {
		return nil
	}
	return e.session(m.sessionKey())
}

func (e *Entity) session(id string) *session {
	s := e.sessions[id]
	if s == nil {
		s = &session{id: id, avail: newMsgHeap(hAvail), readyIdx: -1, heldIdx: -1}
		e.sessions[id] = s
	}
	return s
}

// sessionGone records that m left the main queue for good.
func (e *Entity) sessionGone(sq *subqueue, m *message) {
	if s := e.sessionFor(sq, m); s != nil {
		if s.avail.has(m) {
			s.avail.del(m)
			e.sessAvailLen--
			e.reindexSession(s)
		}
		s.count--
		e.gcSession(s)
	}
}

// gcSession forgets a session that has no messages, no state and no lock.
func (e *Entity) gcSession(s *session) {
	if s.count <= 0 && s.state == nil && s.holder == nil {
		delete(e.sessions, s.id)
	}
}

// availLen counts the available messages of the main queue, in every session.
func (e *Entity) availLen() int { return e.main.heaps[hAvail].Len() + e.sessAvailLen }

// lockSession gives s to r until now + LockDuration.
func (e *Entity) lockSession(s *session, r *Receiver, now time.Time) {
	s.holder = r
	s.lockedUntil = now.Add(e.opts.LockDuration)
	r.sess = s
	e.reindexSession(s)
}

// unlockSession ends r's hold on its session: the messages it locked come back, with
// their delivery counted when the lock expired and not counted when the receiver closed
// (as a dropped connection does), and the session is available to the next receiver.
func (e *Entity) unlockSession(r *Receiver, expired bool) {
	s := r.sess
	if s == nil || s.holder != r {
		return
	}
	held := make([]*message, 0, len(s.locked))
	for m := range s.locked {
		if m.holder == r {
			held = append(held, m)
		}
	}
	slices.SortFunc(held, func(a, b *message) int { return int(a.seq - b.seq) })
	for _, m := range held {
		e.unlock(&e.main, m)
		if expired {
			e.stats.lockExpired.Add(1)
			e.release(&e.main, m, true)
			continue
		}
		e.requeue(&e.main, m)
	}
	s.holder = nil
	r.sessLost = true
	e.reindexSession(s)
	e.main.signal()
	e.gcSession(s)
}

// tickSessions expires the session locks that ran out by now: O(1) when none did.
func (e *Entity) tickSessions(now time.Time) {
	for s, ok := e.heldSess.Peek(); ok && !now.Before(s.lockedUntil); s, ok = e.heldSess.Peek() {
		e.stats.sessionLocksExpired.Add(1)
		e.unlockSession(s.holder, true) // takes s out of heldSess
	}
}

// nextSession returns the unlocked session with available messages whose first message
// is the oldest, or nil.
func (e *Entity) nextSession() *session {
	s, _ := e.readySess.Peek()
	return s
}

// nextSessionLockDue returns the earliest session lock expiry.
func (e *Entity) nextSessionLockDue() (time.Time, bool) {
	s, ok := e.heldSess.Peek()
	if !ok {
		return time.Time{}, false
	}
	return s.lockedUntil, true
}

// SessionInfo describes a session of an entity that requires sessions.
type SessionInfo struct {
	// ID is the session id.
	ID string
	// State is a copy of the session state; nil when none is set.
	State []byte
	// Messages counts the session's messages in the main queue, in any state.
	Messages int
	// Active counts the session's messages available for delivery.
	Active int
	// Locked reports whether a session receiver holds the session; LockedUntil is when
	// its lock expires.
	Locked      bool
	LockedUntil time.Time
}

// Sessions returns the entity's sessions (those with messages, state or a lock), by id.
// It returns nil for an entity that does not require sessions.
func (e *Entity) Sessions() []SessionInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	var out []SessionInfo
	for _, s := range e.sessions {
		info := SessionInfo{ID: s.id, State: cloneBytes(s.state), Messages: s.count, Active: s.avail.Len(), Locked: s.holder != nil}
		if s.holder != nil {
			info.LockedUntil = s.lockedUntil
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// SessionState returns a copy of a session's state, nil when it has none.
func (e *Entity) SessionState(sessionID string) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sessions[sessionID]; s != nil {
		return cloneBytes(s.state)
	}
	return nil
}

// ExpireSessionLock makes the lock on a session lost now, as if it had expired: the
// messages its receiver locked come back with their delivery counted, later operations
// of that receiver return CodeLockLost, and the session can be accepted again. It
// reports whether the session was locked.
func (e *Entity) ExpireSessionLock(sessionID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	s := e.sessions[sessionID]
	if s == nil || s.holder == nil {
		return false
	}
	e.stats.sessionLocksExpired.Add(1)
	e.unlockSession(s.holder, true)
	return true
}

// requiresSession reports whether messages sent to t need a SessionID: t is a queue that
// requires sessions, or a topic with a subscription that does (sbtest refuses the send
// rather than storing a message that subscription could never deliver).
func requiresSession(t sendTarget) bool {
	switch t := t.(type) {
	case *Entity:
		return t.Options().RequiresSession // under its lock: SetOptions replaces opts
	case *Topic:
		for _, s := range t.Subscriptions() {
			if s.Options().RequiresSession {
				return true
			}
		}
	}
	return false
}
