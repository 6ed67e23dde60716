package reqreply

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// SenderFor returns the sender for a request's ReplyTo address. It is called for every
// reply; cache senders in it (an [*azservicebus.Sender] per reply queue) when replies go
// to more than one place.
type SenderFor func(replyTo string) (sbkit.MessageSender, error)

// Responder sends replies to requests. Safe for concurrent use when its SenderFor is.
type Responder struct {
	senders SenderFor
}

// NewResponder returns a Responder that sends each reply with the sender senders returns
// for the request's ReplyTo. It returns [ErrNilSender] for a nil senders.
func NewResponder(senders SenderFor) (*Responder, error) {
	if senders == nil {
		return nil, ErrNilSender
	}
	return &Responder{senders: senders}, nil
}

// Reply sends resp as the reply to req: to req.ReplyTo, with SessionID set to
// req.ReplyToSessionID and CorrelationID to req.MessageID (resp's own values for these
// are overwritten; its MessageID is set when empty). It returns ErrNotARequest when req
// has no ReplyTo or ReplyToSessionID, [sbkit.ErrNilMessage] for a nil req or resp, and
// the sender's error otherwise.
func (r *Responder) Reply(ctx context.Context, req *azservicebus.ReceivedMessage, resp *azservicebus.Message) error {
	if req == nil || resp == nil {
		return sbkit.ErrNilMessage
	}
	if !isRequest(req) {
		return ErrNotARequest
	}
	s, err := r.senders(*req.ReplyTo)
	if err != nil {
		return fmt.Errorf("reqreply: sender for %q: %w", *req.ReplyTo, err)
	}
	if _, err := sbkit.EnsureMessageID(resp); err != nil {
		return err
	}
	session, corr := *req.ReplyToSessionID, req.MessageID
	resp.SessionID = &session
	resp.CorrelationID = &corr
	if err := s.SendMessage(ctx, resp, nil); err != nil {
		return fmt.Errorf("reqreply: sending reply: %w", err)
	}
	return nil
}

// ReplyFunc handles a request and returns its reply.
type ReplyFunc func(ctx context.Context, req *azservicebus.ReceivedMessage) (*azservicebus.Message, error)

// Handler returns an [sbkit.Handler] that runs fn and sends its reply before the request
// is settled: an error from fn or from sending the reply is returned (so the request is
// abandoned and retried, or settled as the marker error says); a request that is not a
// request (no ReplyTo) is dead-lettered through [sbkit.DeadLetter], since no retry can
// answer it. It returns [sbkit.ErrNilHandler] (wrapped) for a nil fn.
func (r *Responder) Handler(fn ReplyFunc) (sbkit.Handler, error) {
	if fn == nil {
		return nil, fmt.Errorf("reqreply: nil ReplyFunc: %w", sbkit.ErrNilHandler)
	}
	return func(ctx context.Context, req *azservicebus.ReceivedMessage) error {
		if !isRequest(req) {
			return sbkit.DeadLetter("NotARequest", ErrNotARequest.Error(), ErrNotARequest)
		}
		resp, err := fn(ctx, req)
		if err != nil {
			return err
		}
		return r.Reply(ctx, req, resp)
	}, nil
}

// isRequest reports whether req says where its reply goes: a ReplyTo and a
// ReplyToSessionID.
func isRequest(req *azservicebus.ReceivedMessage) bool {
	return req.ReplyTo != nil && *req.ReplyTo != "" && req.ReplyToSessionID != nil
}
