package deadletter

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error of a call with invalid options: a
	// negative count, rate or duration, a hook of no hook interface, a dry run without a
	// [Peeker].
	ErrInvalidOptions = errors.New("deadletter: invalid options")

	// ErrPermanentFailure is wrapped by the error of a [Redrive] or [Import] that stopped
	// at its first permanent failure ([RedriveOptions.StopOnPermanentFailure]); the
	// failure itself is wrapped too.
	ErrPermanentFailure = errors.New("deadletter: stopped at a permanent failure")

	// ErrUnsupportedBody is the cause of a message whose body is an AMQP value, an AMQP
	// sequence or several data sections, sent to a destination that has no
	// SendAMQPAnnotatedMessage ([AMQPSender]). The message is not sent and, in a
	// re-drive, stays in the dead-letter queue.
	ErrUnsupportedBody = errors.New("deadletter: body kind needs an AMQPSender")

	// ErrBadRecord is wrapped by the error of [Import] and [ReadRecord] for a line that is
	// not a [Record].
	ErrBadRecord = errors.New("deadletter: bad record")
)
