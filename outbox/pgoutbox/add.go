package pgoutbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
)

// ErrNoTransaction is returned by Add for a nil transaction, such as the nil that
// pgdedupe.TxFrom returns for a context that does not come from its TxFilter.
var ErrNoTransaction = errors.New("pgoutbox: no transaction")

// Add stores msgs in the outbox inside tx, to be sent to destination (a queue or topic
// name, as the Relay's [Destinations] understands it) once tx commits; if tx rolls back
// they are never sent. Nothing is sent by Add itself.
//
// Every message gets its MessageID now: a message without one is given a random UUID
// ([sbkit.NewMessageID]), written to the caller's message too. Every later attempt to
// send it, by any relay, carries that id, so the broker's duplicate detection drops a
// repeat. Every field of [azservicebus.Message] is stored and sent as given: Body,
// ContentType, CorrelationID, MessageID, PartitionKey, ReplyTo, ReplyToSessionID,
// ScheduledEnqueueTime (to the microsecond; the broker keeps milliseconds), SessionID,
// Subject, TimeToLive, To, and ApplicationProperties with their Go types (nil, bool,
// string, every integer and float type, []byte, time.Time, amqp.UUID, amqp.Symbol). A nil
// string field stays nil and an empty one stays empty (an empty SessionID is a session).
//
// The messages of one transaction to one destination are sent in the order of the Add
// calls and of msgs. The messages that share a SessionID (or, without one, a
// PartitionKey) across transactions are sent in the order the relays find them
// committed: the messages of the transactions committed by then in the order they were
// added, and a transaction that commits after later-added messages were sent after
// those (serialize the writers of a session, with a row lock for example, when their
// order must be the order of the calls). Add notifies the relays (NOTIFY on
// [Outbox.Channel]), which PostgreSQL delivers at commit, unless
// [Options.DisableNotify] is set.
//
// Errors: [ErrNoTransaction] for a nil tx; an error wrapping [sbkit.ErrNilMessage] for a
// nil message and one wrapping [ErrInvalidMessage] for an empty destination or a message
// the table cannot hold faithfully (see ErrInvalidMessage): then nothing is written and
// no message is changed. A database error is returned wrapped; tx is then in whatever
// state PostgreSQL left it (usually aborted: roll it back). Add is safe for concurrent
// use on different transactions; a pgx.Tx itself is not.
func (ob *Outbox) Add(ctx context.Context, tx pgx.Tx, destination string, msgs ...*azservicebus.Message) error {
	if tx == nil {
		return ErrNoTransaction
	}
	if destination == "" || !textSafe(destination) {
		return fmt.Errorf("%w: destination %q", ErrInvalidMessage, destination)
	}
	if len(msgs) == 0 {
		return nil
	}
	rows := make([]*encoded, len(msgs))
	newIDs := make([]string, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("pgoutbox: message %d: %w", i, sbkit.ErrNilMessage)
		}
		c := *m
		if c.MessageID == nil || *c.MessageID == "" {
			newIDs[i] = sbkit.NewMessageID()
			c.MessageID = &newIDs[i]
		}
		e, err := encode(&c)
		if err != nil {
			return fmt.Errorf("pgoutbox: message %d: %w", i, err)
		}
		rows[i] = e
	}
	for i, m := range msgs {
		if newIDs[i] != "" {
			m.MessageID = &newIDs[i]
		}
	}
	var b pgx.Batch
	for _, e := range rows {
		b.Queue(ob.insert, append([]any{destination, e.orderKey()}, e.args()...)...)
	}
	if ob.addNotify {
		b.Queue(ob.notify, ob.channel)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("pgoutbox: add: %w", err)
	}
	return nil
}
