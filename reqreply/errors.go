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
)
