package reqreply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/hooks"
	"github.com/sbkit/sbkit/internal/retry"
)

// UnexpectedReplyReason is the dead-letter reason of a message found in a requester's
// reply session whose CorrelationID is not the request's MessageID.
const UnexpectedReplyReason = "UnexpectedReply"

// DefaultCloseTimeout bounds the release of a reply session after Request returns.
const DefaultCloseTimeout = 10 * time.Second

// defaultCompleteRetry is the default of RequesterOptions.CompleteRetry.
var defaultCompleteRetry = retry.Policy{MaxRetries: 3, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}

// RequesterOptions configures a Requester. The zero value (and nil) means defaults.
type RequesterOptions struct {
	// CloseTimeout bounds completing the reply and releasing the reply session when
	// Request returns (their own context, since the caller's may have ended); default
	// DefaultCloseTimeout (10s); negative is an error (Request must return however the
	// broker answers).
	CloseTimeout time.Duration
	// CompleteRetry is the policy for completing a reply that failed with a transient
	// error, within CloseTimeout. Default: MaxRetries 3, RetryDelay 100 ms,
	// MaxRetryDelay 1 s.
	CompleteRetry sbkit.RetryOptions
	// Hooks observe the requester: each implements [ReplyNotCompletedHook] (one that
	// does not is an error). They run
	// synchronously on the caller's goroutine, must be fast, and may be called
	// concurrently; a panic in a hook is recovered and logged. Default: none.
	Hooks []Hook
	// Logger receives reply-session events (never payloads); default discards.
	Logger *slog.Logger
}

// Hook is an observer of a Requester: a value implementing [ReplyNotCompletedHook].
// [NewRequester] refuses a value that does not (an error wrapping [ErrInvalidOptions]),
// so that a misspelt method is not silently ignored.
type Hook any

// ReplyNotCompletedHook is told when Request returned a reply it could not complete.
// The reply stays in its reply session, which nobody accepts again, until its time to
// live passes (then it is dropped, or dead-lettered if the reply queue dead-letters
// expired messages); count it, alert on it, or give replies a short TimeToLive.
type ReplyNotCompletedHook interface {
	OnReplyNotCompleted(ctx context.Context, e ReplyNotCompleted)
}

// ReplyNotCompletedHookFunc adapts a function to a [ReplyNotCompletedHook].
type ReplyNotCompletedHookFunc func(ctx context.Context, e ReplyNotCompleted)

// OnReplyNotCompleted calls f.
func (f ReplyNotCompletedHookFunc) OnReplyNotCompleted(ctx context.Context, e ReplyNotCompleted) {
	f(ctx, e)
}

// ReplyNotCompleted is the event of [ReplyNotCompletedHook].
type ReplyNotCompleted struct {
	// Reply is the reply Request returned.
	Reply *azservicebus.ReceivedMessage
	// Err wraps [ErrReplyNotCompleted] and the broker's last error.
	Err error
}

// Requester sends requests and waits for their replies. It is safe for concurrent use:
// every Request waits on its own reply session.
type Requester struct {
	sender        sbkit.MessageSender
	replies       sbkit.SessionAcceptor
	replyTo       string
	closeTimeout  time.Duration
	completeRetry retry.Policy
	notCompleted  []ReplyNotCompletedHook
	log           *slog.Logger
}

// NewRequester returns a Requester that sends requests with sender and receives replies
// from the session-enabled queue (or subscription) that replies accepts sessions of;
// replyTo is the address written to each request's ReplyTo (the reply queue's name).
// nil options mean defaults. It returns [ErrNilSender] or [ErrNilAcceptor] for a nil
// sender or acceptor, and an error wrapping [ErrInvalidOptions] for an empty replyTo, a
// negative CloseTimeout or a hook of no hook interface.
func NewRequester(sender sbkit.MessageSender, replies sbkit.SessionAcceptor, replyTo string, opts *RequesterOptions) (*Requester, error) {
	var o RequesterOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case sender == nil:
		return nil, ErrNilSender
	case replies == nil:
		return nil, ErrNilAcceptor
	case replyTo == "":
		return nil, fmt.Errorf("%w: empty replyTo", ErrInvalidOptions)
	case o.CloseTimeout < 0:
		return nil, fmt.Errorf("%w: negative CloseTimeout %v", ErrInvalidOptions, o.CloseTimeout)
	}
	isHook := func(x any) bool { _, ok := x.(ReplyNotCompletedHook); return ok }
	if err := hooks.Check(o.Hooks, isHook, "ReplyNotCompletedHook"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Requester{sender: sender, replies: replies, replyTo: replyTo, closeTimeout: o.CloseTimeout,
		completeRetry: retry.Resolve(o.CompleteRetry, defaultCompleteRetry),
		notCompleted:  hooks.Select[ReplyNotCompletedHook](o.Hooks), log: o.Logger}, nil
}

// Request sends req and returns its reply, completed. It sets req's MessageID (when
// empty), ReplyTo and ReplyToSessionID (a new UUID), accepts that session of the reply
// queue first, then sends, then waits until a message with CorrelationID equal to the
// MessageID arrives or ctx ends (ctx.Err(), or the acceptor's or sender's error). Other
// messages found in the session are dead-lettered with UnexpectedReplyReason. The reply
// session is released before Request returns. It returns [sbkit.ErrNilMessage] for a nil
// req.
//
// Once the reply has arrived the request has been answered, and Request returns the
// reply with a nil error whatever becomes of completing it: an error would make a
// caller that retries run the request twice. Completing uses its own context (bounded
// by CloseTimeout, so a ctx that ends now does not lose it) and retries transient
// errors (CompleteRetry); if it still fails, the failure is logged and reported to the
// [ReplyNotCompletedHook]s, and the reply stays behind in its reply session until it
// expires.
func (r *Requester) Request(ctx context.Context, req *azservicebus.Message) (*azservicebus.ReceivedMessage, error) {
	id, err := sbkit.EnsureMessageID(req)
	if err != nil {
		return nil, err
	}
	session := sbkit.NewMessageID()
	req.ReplyTo = &r.replyTo
	req.ReplyToSessionID = &session
	sr, err := r.replies.AcceptSession(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("reqreply: accepting reply session: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.closeTimeout)
		defer cancel()
		if err := sr.Close(cctx); err != nil {
			r.log.Warn("releasing reply session failed", "session", session, "err", err)
		}
	}()
	if err := r.sender.SendMessage(ctx, req, nil); err != nil {
		return nil, fmt.Errorf("reqreply: sending request: %w", err)
	}
	for {
		msgs, err := sr.ReceiveMessages(ctx, 1, nil)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return nil, err
			}
			return nil, fmt.Errorf("reqreply: receiving reply: %w", err)
		}
		for _, m := range msgs {
			if m.CorrelationID != nil && *m.CorrelationID == id {
				r.complete(ctx, sr, m, session)
				return m, nil
			}
			r.log.Warn("unexpected message in reply session", "session", session, "messageID", m.MessageID)
			desc := fmt.Sprintf("reply session %s waits for CorrelationID %s", session, id)
			if err := sr.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: ptr(UnexpectedReplyReason), ErrorDescription: &desc}); err != nil {
				return nil, fmt.Errorf("reqreply: dead-lettering an unexpected reply: %w", err)
			}
		}
	}
}

// complete completes the reply m, retrying transient errors within CloseTimeout, and
// reports a failure that lasts. ctx gives values only.
func (r *Requester) complete(ctx context.Context, sr sbkit.SessionReceiver, m *azservicebus.ReceivedMessage, session string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.closeTimeout)
	defer cancel()
	rs := r.completeRetry.Retries()
	for {
		err := sr.CompleteMessage(cctx, m, nil)
		if err == nil {
			return
		}
		if sbkit.IsTransient(err) && cctx.Err() == nil {
			if wait, ok := rs.Next(); ok && retry.Wait(cctx, wait) {
				continue
			}
		}
		err = fmt.Errorf("%w: session %s, message %s: %w", ErrReplyNotCompleted, session, m.MessageID, err)
		r.log.Warn("reply returned but not completed", "session", session, "messageID", m.MessageID, "err", err)
		hooks.Call(ctx, r.log, "reqreply", "ReplyNotCompletedHook", r.notCompleted,
			func(h ReplyNotCompletedHook) { h.OnReplyNotCompleted(ctx, ReplyNotCompleted{Reply: m, Err: err}) })
		return
	}
}

func ptr[T any](v T) *T { return &v }
