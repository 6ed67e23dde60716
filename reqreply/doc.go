// Package reqreply implements Service Bus request/reply over sessions (the multiplexed
// request/reply pattern of the message routing documentation): a Requester sends a
// request with ReplyTo naming a session-enabled reply queue and a unique
// ReplyToSessionID, and waits on that one session of the reply queue for the reply whose
// CorrelationID is the request's MessageID; a Responder sends a handler's reply to
// ReplyTo with SessionID set to the request's ReplyToSessionID and CorrelationID to its
// MessageID. Many requesters share one reply queue: each waits on its own session.
//
// The session is accepted (and so locked) before the request is sent, so no other
// receiver of the reply queue can take the reply, and it is released when Request
// returns: no receiver lingers after a call, whatever its outcome.
//
// It lives in its own package because it needs both a sender and session receivers and
// sits beside, not inside, the processors of package receiver: a requester is a caller
// that blocks for one answer, not a worker.
package reqreply
