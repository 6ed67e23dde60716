package reqreply

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error NewRequester returns for a missing
	// sender, acceptor or reply queue, or a negative CloseTimeout. (NewResponder's only
	// argument error is a nil SenderFor, which wraps [sbkit.ErrNilHandler].)
	ErrInvalidOptions = errors.New("reqreply: invalid options")
	// ErrNotARequest is returned by Responder.Reply for a request without ReplyTo or
	// ReplyToSessionID: there is nowhere to send the reply. It is not retried.
	ErrNotARequest = errors.New("reqreply: message has no ReplyTo or ReplyToSessionID")
	// ErrReplyNotCompleted is wrapped by the error a [ReplyNotCompletedHook] receives
	// when a Requester returned a reply it could not complete: the reply stays in its
	// reply session, which nobody accepts again, until its time to live passes.
	ErrReplyNotCompleted = errors.New("reqreply: reply returned but not completed; it stays in its reply session until it expires")
)
