package reqreply

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error NewRequester returns for an empty
	// replyTo, a negative CloseTimeout or a hook of no hook interface.
	ErrInvalidOptions = errors.New("reqreply: invalid options")
	// ErrNilSender is returned by NewRequester for a nil sender and by NewResponder for
	// a nil SenderFor.
	ErrNilSender = errors.New("reqreply: nil sender")
	// ErrNilAcceptor is returned by NewRequester for a nil session acceptor.
	ErrNilAcceptor = errors.New("reqreply: nil session acceptor")
	// ErrNotARequest is returned by Responder.Reply for a request without ReplyTo or
	// ReplyToSessionID: there is nowhere to send the reply. It is not retried.
	ErrNotARequest = errors.New("reqreply: message has no ReplyTo or ReplyToSessionID")
	// ErrReplyNotCompleted is wrapped by the error a [ReplyNotCompletedHook] receives
	// ([ReplyNotCompleted].Err) when a Requester returned a reply it could not complete: the reply stays in its
	// reply session, which nobody accepts again, until its time to live passes.
	ErrReplyNotCompleted = errors.New("reqreply: reply returned but not completed; it stays in its reply session until it expires")
)
