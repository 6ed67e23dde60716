package reqreply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// UnexpectedReplyReason is the dead-letter reason of a message found in a requester's
// reply session whose CorrelationID is not the request's MessageID.
const UnexpectedReplyReason = "UnexpectedReply"

// DefaultCloseTimeout bounds the release of a reply session after Request returns.
const DefaultCloseTimeout = 10 * time.Second

// RequesterOptions configures a Requester. The zero value (and nil) means defaults.
type RequesterOptions struct {
	// CloseTimeout bounds releasing the reply session when Request returns (its own
	// context, since the caller's may have ended); default DefaultCloseTimeout (10s).
	CloseTimeout time.Duration
	// Logger receives reply-session events (never payloads); default discards.
	Logger *slog.Logger
}

// Requester sends requests and waits for their replies. It is safe for concurrent use:
// every Request waits on its own reply session.
type Requester struct {
	sender       sbkit.MessageSender
	replies      sbkit.SessionAcceptor
	replyTo      string
	closeTimeout time.Duration
	log          *slog.Logger
}

// NewRequester returns a Requester that sends requests with sender and receives replies
// from the session-enabled queue (or subscription) that replies accepts sessions of;
// replyTo is the address written to each request's ReplyTo (the reply queue's name).
// nil options mean defaults. It returns ErrInvalidOptions for a nil sender or acceptor
// or an empty replyTo, or a negative CloseTimeout.
func NewRequester(sender sbkit.MessageSender, replies sbkit.SessionAcceptor, replyTo string, opts *RequesterOptions) (*Requester, error) {
	var o RequesterOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case sender == nil:
		return nil, fmt.Errorf("%w: nil sender", ErrInvalidOptions)
	case replies == nil:
		return nil, fmt.Errorf("%w: nil session acceptor", ErrInvalidOptions)
	case replyTo == "":
		return nil, fmt.Errorf("%w: empty replyTo", ErrInvalidOptions)
	case o.CloseTimeout < 0:
		return nil, fmt.Errorf("%w: negative CloseTimeout %v", ErrInvalidOptions, o.CloseTimeout)
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Requester{sender: sender, replies: replies, replyTo: replyTo, closeTimeout: o.CloseTimeout, log: o.Logger}, nil
}

// Request sends req and returns its reply, completed. It sets req's MessageID (when
// empty), ReplyTo and ReplyToSessionID (a new UUID), accepts that session of the reply
// queue first, then sends, then waits until a message with CorrelationID equal to the
// MessageID arrives or ctx ends (ctx.Err(), or the acceptor's or sender's error). Other
// messages found in the session are dead-lettered with UnexpectedReplyReason. The reply
// session is released before Request returns. It returns [sbkit.ErrNilMessage] for a nil
// req.
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
				if err := sr.CompleteMessage(ctx, m, nil); err != nil {
					return nil, fmt.Errorf("reqreply: completing reply: %w", err)
				}
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

func ptr[T any](v T) *T { return &v }
