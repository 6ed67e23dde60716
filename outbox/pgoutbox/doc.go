// Package pgoutbox is a transactional outbox for Azure Service Bus on PostgreSQL (pgx
// v5): a service writes its messages to a table in the same transaction as its data,
// and a relay sends them once the transaction committed, through sbkit's pipelined,
// batching [sender.Sender].
//
// Without it, a handler (or an HTTP request) that writes to its database and sends
// messages either loses the message (crash between the commit and the send) or sends a
// message about work that was rolled back (crash or error between the send and the
// commit). With it:
//
//   - [Outbox.Add] inserts the messages in the caller's pgx.Tx, each with its MessageID
//     fixed at insert. Inside a pgdedupe.TxFilter handler, pass pgdedupe.TxFrom(ctx): one
//     commit covers the work, the message's done mark and the outgoing messages.
//   - A [Relay] claims committed rows, sends them, and deletes each row only after the
//     broker accepted its message. Rows the broker refuses for good move to a dead-letter
//     table with the error ([Outbox.Requeue] puts them back).
//
// # What exactly-once means here
//
// The effects in the database happen once: the messages exist if and only if the
// transaction committed. Each message is delivered at least once: a relay crash after
// the send and before the delete makes a relay send it again, with the same MessageID.
// With duplicate detection on the destination (requiresDuplicateDetection, with a window
// longer than a relay's Lease plus its retries), the broker accepts each MessageID at
// most once per window, so each message is accepted exactly once. Consumers that also
// skip duplicates (package dedupe, pgdedupe.TxFilter) close the loop on their side.
//
// # Tables
//
// [Outbox.CreateSchema] creates them (or put [Outbox.SchemaSQL] in your migrations):
//
//	CREATE TABLE sbkit_outbox (
//	    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
//	    destination            text NOT NULL,    -- queue or topic
//	    order_key              text NOT NULL,    -- 's:'||session, 'p:'||partition key, or 't:'||transaction id
//	    message_id             text NOT NULL,
//	    body                   bytea,
//	    content_type, correlation_id, subject, session_id, partition_key,
//	    reply_to, reply_to_session_id, to_address text,
//	    time_to_live           bigint,           -- nanoseconds
//	    scheduled_enqueue_time timestamptz,
//	    application_properties jsonb,            -- {"name": ["type", "value"]}
//	    created_at             timestamptz NOT NULL DEFAULT now(),
//	    attempts               integer NOT NULL DEFAULT 0,
//	    not_before             timestamptz NOT NULL DEFAULT now(),  -- next attempt
//	    last_error             text
//	);
//	CREATE INDEX sbkit_outbox_order ON sbkit_outbox (destination, order_key, id);
//	CREATE INDEX sbkit_outbox_retry ON sbkit_outbox (destination, order_key, id) WHERE attempts > 0;
//	CREATE TABLE sbkit_outbox_dead (... the same message columns ...,
//	    created_at, attempts, dead_lettered_at timestamptz, error text NOT NULL);
//
// A relay holds the rows it sends locked in a transaction (see [Relay]), so a message
// accepted at its first attempt costs its row an insert (Add) and a delete (the relay),
// nothing more. PostgreSQL 13 or later is required.
//
// # Wake-up, memory and destinations
//
// Add notifies the relays at commit (NOTIFY on [Outbox.Channel]), and relays poll as
// well. PostgreSQL holds one cluster-wide lock through the commit of every transaction
// that notifies, so notifying writers commit one at a time: [Options.DisableNotify]
// leaves the NOTIFY out, and [Outbox.Notify] after the commit wakes the relays with a
// NOTIFY shared by concurrent writers (docs/benchmarks.md, "What Add's NOTIFY costs the
// writers"). Woken either way, an idle relay sends a message about one broker round
// trip after its commit; by polling alone it waits half a [RelayOptions.PollInterval]
// more on average (docs/benchmarks.md, "Wake-up latency"). A relay holds at most [RelayOptions.MaxInFlight] rows and
// [RelayOptions.MaxInFlightBytes] bytes of them in memory. A destination whose sender
// fails for good (closed, its entity deleted) gets a new one from [Destinations], so an
// entity deleted and re-created is sent to again.
//
// # Observation
//
// [Relay.Stats] and the [RelayResultHook] and [RelayErrorHook] observe the relay's rows
// and database calls. The sends themselves are observed with sender hooks:
// [RelayOptions.Sender] (all destinations) and [RelayOptions.SenderHooks] (one
// destination), which is where OpenTelemetry's sender hook goes:
//
//	SenderHooks: func(dest string) []sender.Hook { return []sender.Hook{tel.Sender(dest)} }
//
// The relay's send span is then a PRODUCER span in the relay's trace, and its context is
// injected into the message; a message that already carries a creation context (put in
// its ApplicationProperties before Add, for example by the request that added it) keeps
// it, and the relay's span links to it.
//
// The module is separate from sbkit's core so that importing sbkit never pulls a
// database driver.
package pgoutbox
