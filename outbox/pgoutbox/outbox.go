package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNilPool is returned by New for a nil pool.
var ErrNilPool = errors.New("pgoutbox: nil pool")

// DefaultTable is the table Options.Table defaults to; its dead-letter table is
// DefaultTable + "_dead".
const DefaultTable = "sbkit_outbox"

// maxIdentifier is the longest identifier and channel name PostgreSQL keeps whole
// (NAMEDATALEN-1 bytes).
const maxIdentifier = 63

// Options configures an Outbox. nil options, and zero fields, mean the defaults.
// Names PostgreSQL would cut are refused (an error wrapping [ErrInvalidOptions]): a
// Schema of up to 63 bytes, a Table of up to 57 (its indexes are Table + "_order" and
// Table + "_retry"), and together, with Schema, up to 62 (the channel "schema.table").
type Options struct {
	// Schema is the schema of both tables; "" (the default) means the connection's
	// search_path.
	Schema string
	// Table is the outbox table's name. Default: DefaultTable ("sbkit_outbox"). The
	// dead-letter table is Table + "_dead", and the notification channel is the
	// schema-qualified table name ("schema.table", or "table" without Schema).
	Table string
	// DisableNotify leaves the NOTIFY out of Add: the relays then find the rows by
	// polling ([RelayOptions.PollInterval]), or when [Outbox.Notify] is called after
	// the commit. PostgreSQL takes one lock, cluster-wide, through the commit of every
	// transaction that notifies, so notifying writers commit one at a time (measured in
	// docs/benchmarks.md); without the NOTIFY their commits are grouped again. Default
	// false: Add notifies, and PostgreSQL delivers the notification at commit.
	DisableNotify bool
}

// Outbox is a transactional outbox in PostgreSQL: [Outbox.Add] stores messages in the
// caller's transaction, and a [Relay] sends the committed ones. It is safe for
// concurrent use and owns no goroutine; the pool is the caller's, and so is closing it.
type Outbox struct {
	pool    *pgxpool.Pool
	table   string // quoted, schema-qualified
	dead    string // quoted, schema-qualified dead-letter table
	index   string // quoted name of the ordering index
	retries string // quoted name of the index of the rows that wait for a retry
	channel string // LISTEN/NOTIFY channel

	insert, notify string
	addNotify      bool // Add notifies

	nmu      sync.Mutex
	nPending *notifyRound // the next NOTIFY of Notify, not started yet
	nRunning bool         // a goroutine sends Notify's rounds
}

// notifyRound is one NOTIFY sent for the Notify calls that joined it.
type notifyRound struct {
	done chan struct{}
	err  error
}

// New returns an Outbox whose tables live in pool's database. nil options mean
// defaults. It returns [ErrNilPool] for a nil pool, and an error wrapping
// [ErrInvalidOptions] for names PostgreSQL would cut (see [Options]). It does not create the tables: call
// CreateSchema (or run its SQL in your migrations).
func New(pool *pgxpool.Pool, opts *Options) (*Outbox, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	// PostgreSQL cuts identifiers and channel names to NAMEDATALEN-1 (63) bytes:
	// "_order", "_retry" and "_dead" cut would name one object twice, and a channel of
	// 64 bytes makes pg_notify fail (aborting the caller's transaction) while LISTEN
	// cuts it silently ("Identifiers and Key Words", PostgreSQL documentation).
	switch {
	case len(o.Schema) > maxIdentifier:
		return nil, fmt.Errorf("%w: Schema of %d bytes, at most %d", ErrInvalidOptions, len(o.Schema), maxIdentifier)
	case len(o.Table)+len("_order") > maxIdentifier:
		return nil, fmt.Errorf("%w: Table of %d bytes, at most %d (with its suffix _order)", ErrInvalidOptions, len(o.Table), maxIdentifier-len("_order"))
	case o.Schema != "" && len(o.Schema)+1+len(o.Table) > maxIdentifier:
		return nil, fmt.Errorf("%w: Schema and Table of %d bytes together, at most %d (the channel Schema.Table)",
			ErrInvalidOptions, len(o.Schema)+len(o.Table), maxIdentifier-1)
	}
	qualify := func(name string) string {
		if o.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{o.Schema, name}.Sanitize()
	}
	ob := &Outbox{
		pool:      pool,
		table:     qualify(o.Table),
		dead:      qualify(o.Table + "_dead"),
		index:     pgx.Identifier{o.Table + "_order"}.Sanitize(),
		retries:   pgx.Identifier{o.Table + "_retry"}.Sanitize(),
		channel:   o.Table,
		addNotify: !o.DisableNotify,
	}
	if o.Schema != "" {
		ob.channel = o.Schema + "." + o.Table
	}
	ob.insert = `INSERT INTO ` + ob.table + ` (destination, order_key, ` + messageColumns + `)
VALUES ($1, coalesce($2, 't:' || pg_current_xact_id()::text), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`
	ob.notify = `SELECT pg_notify($1, '')`
	return ob, nil
}

// notifyTimeout bounds one NOTIFY of Notify.
const notifyTimeout = 5 * time.Second

// Notify wakes the relays now, in a transaction of its own: the wake-up for writers
// that set [Options.DisableNotify], called after their commit. Concurrent calls share
// NOTIFYs: a call joins the next one to start (never one already sent, which could
// reach a relay before the caller's commit is visible), so that many writers cost one
// NOTIFY per round trip, not one each. It returns the NOTIFY's error, or ctx's when ctx
// ends first. While NOTIFYs are pending, one goroutine sends them; none remains after.
func (ob *Outbox) Notify(ctx context.Context) error {
	ob.nmu.Lock()
	r := ob.nPending
	if r == nil {
		r = &notifyRound{done: make(chan struct{})}
		ob.nPending = r
		if !ob.nRunning {
			ob.nRunning = true
			go ob.notifyRounds()
		}
	}
	ob.nmu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notifyRounds sends the pending rounds of Notify, one at a time, until none is left.
func (ob *Outbox) notifyRounds() {
	for {
		ob.nmu.Lock()
		r := ob.nPending
		ob.nPending = nil
		if r == nil {
			ob.nRunning = false
			ob.nmu.Unlock()
			return
		}
		ob.nmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		if _, err := ob.pool.Exec(ctx, ob.notify, ob.channel); err != nil {
			r.err = fmt.Errorf("pgoutbox: notify: %w", err)
		}
		cancel()
		close(r.done)
	}
}

// Table returns the quoted, schema-qualified name of the outbox table.
func (ob *Outbox) Table() string { return ob.table }

// DeadLetterTable returns the quoted, schema-qualified name of the dead-letter table.
func (ob *Outbox) DeadLetterTable() string { return ob.dead }

// Channel returns the name of the LISTEN/NOTIFY channel that Add notifies at commit
// (unless [Options.DisableNotify]) and Notify notifies.
func (ob *Outbox) Channel() string { return ob.channel }

// messageColumns are the columns holding an [azservicebus.Message], in the order of
// [encoded] and of the insert's parameters $3 to $15.
const messageColumns = `message_id, body, content_type, correlation_id, subject, session_id,
partition_key, reply_to, reply_to_session_id, to_address, time_to_live,
scheduled_enqueue_time, application_properties`

// CreateSchema creates the outbox table, its two indexes and the dead-letter table
// unless they exist (the schema, when Options.Schema names one, must exist). It is
// idempotent: safe to call at every start, from many processes at once. PostgreSQL 13
// or later is required (pg_current_xact_id).
func (ob *Outbox) CreateSchema(ctx context.Context) error {
	// A transaction-level advisory lock serializes concurrent first runs: CREATE ... IF
	// NOT EXISTS alone can still collide on the catalog's unique index.
	err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, ob.table); err != nil {
			return err
		}
		for _, stmt := range ob.schemaSQL() {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgoutbox: create schema: %w", err)
	}
	return nil
}

// SchemaSQL returns the statements CreateSchema runs, for migrations.
func (ob *Outbox) SchemaSQL() string { return strings.Join(ob.schemaSQL(), ";\n") + ";\n" }

func (ob *Outbox) schemaSQL() []string {
	const message = `
	message_id             text NOT NULL,
	body                   bytea,
	content_type           text,
	correlation_id         text,
	subject                text,
	session_id             text,
	partition_key          text,
	reply_to               text,
	reply_to_session_id    text,
	to_address             text,
	time_to_live           bigint,
	scheduled_enqueue_time timestamptz,
	application_properties jsonb,`
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + ob.table + ` (
	id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	destination            text NOT NULL,
	order_key              text NOT NULL,` + message + `
	created_at             timestamptz NOT NULL DEFAULT now(),
	attempts               integer NOT NULL DEFAULT 0,
	not_before             timestamptz NOT NULL DEFAULT now(),
	last_error             text
)`,
		`CREATE INDEX IF NOT EXISTS ` + ob.index + ` ON ` + ob.table + ` (destination, order_key, id)`,
		// Only rows that failed at least once: a relay's claim probes it for every
		// candidate (does an earlier row of its order wait for a retry?).
		`CREATE INDEX IF NOT EXISTS ` + ob.retries + ` ON ` + ob.table + ` (destination, order_key, id) WHERE attempts > 0`,
		`CREATE TABLE IF NOT EXISTS ` + ob.dead + ` (
	id                     bigint PRIMARY KEY,
	destination            text NOT NULL,
	order_key              text NOT NULL,` + message + `
	created_at             timestamptz NOT NULL,
	attempts               integer NOT NULL,
	dead_lettered_at       timestamptz NOT NULL DEFAULT now(),
	error                  text NOT NULL
)`,
	}
}

// Requeue moves the dead-lettered rows with the given ids back into the outbox, due at
// once with no attempts, and returns how many it moved (ids not in the dead-letter
// table are ignored). A requeued row keeps its message, MessageID and order key, and
// comes after the rows already waiting in its order. Use it once the cause is fixed (the
// entity created, the rights granted). Database errors are returned wrapped; nothing is
// moved then.
func (ob *Outbox) Requeue(ctx context.Context, ids ...int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := pgx.BeginFunc(ctx, ob.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH moved AS (DELETE FROM `+ob.dead+` WHERE id = ANY($1) RETURNING *)
INSERT INTO `+ob.table+` (destination, order_key, `+messageColumns+`, created_at)
SELECT destination, order_key, `+messageColumns+`, created_at FROM moved ORDER BY id`, ids)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, ob.notify, ob.channel)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgoutbox: requeue: %w", err)
	}
	return n, nil
}
