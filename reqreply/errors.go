package reqreply

import "errors"

var (
	// ErrInvalidOptions is returned by NewRequester and NewResponder for a missing reply
	// queue or sender.
	ErrInvalidOptions = errors.New("reqreply: invalid options")
	// ErrNotARequest is returned by Responder.Reply for a request without ReplyTo or
	// ReplyToSessionID: there is nowhere to send the reply. It is not retried.
	ErrNotARequest = errors.New("reqreply: message has no ReplyTo or ReplyToSessionID")
)
