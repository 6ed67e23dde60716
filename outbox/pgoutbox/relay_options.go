package pgoutbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/sbkit/sbkit"
	ihooks "github.com/sbkit/sbkit/outbox/pgoutbox/internal/hooks"
	"github.com/sbkit/sbkit/outbox/pgoutbox/internal/retry"
	"github.com/sbkit/sbkit/sender"
)

// Defaults of [RelayOptions].
const (
	DefaultLease      = 30 * time.Second
	DefaultClaimBatch = 512
	// DefaultMaxInFlight and DefaultMaxInFlightBytes are four times the senders' window
	// ([sender.DefaultMaxInFlightMessages], [sender.DefaultMaxInFlightBytes]), so that
	// claims keep it full while the rows of earlier claims wait to be marked, or wait
	// in the relay for the earlier rows of their sessions.
	DefaultMaxInFlight      = 4096
	DefaultMaxInFlightBytes = 64 << 20
	// DefaultMaxOpenClaims is as many claims of DefaultClaimBatch rows as fill
	// DefaultMaxInFlight.
	DefaultMaxOpenClaims = 8
	DefaultPollInterval  = time.Second
	DefaultShutdownGrace = 5 * time.Second
	DefaultMaxRetries    = 10
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = time.Minute
)

// ErrInvalidOptions is wrapped by NewRelay's and New's errors for options they cannot
// use.
var ErrInvalidOptions = errors.New("pgoutbox: invalid options")

// RelayOptions configures a [Relay]. nil options, and zero fields, mean the defaults.
// A negative value means no limit where no limit makes sense (ShutdownGrace), and is an
// error wrapping [ErrInvalidOptions] where it does not; each field says which. Retry
// follows [sbkit.RetryOptions].
type RelayOptions struct {
	// Sender configures the relay's senders, one [sender.Sender] per destination. Its
	// Ordered is always on and its OrderKey is the relay's (the relay's ordering relies
	// on both); its AttemptTimeout defaults to a quarter of Lease, so that no request
	// outlives a claim. Its Linger does not delay the relay's rows: the relay hands a
	// claim's rows over at once and then seals the open batches. Its window
	// (MaxInFlightMessages, MaxInFlightBytes) holds the rows that can go on the wire:
	// the relay gives a sender a row only when the window has room for it (bytes as
	// [sbkit.MessageSize] estimates them before the sender's hooks run), and the rows
	// of a session (or of a transaction sent in order) that wait for its earlier rows
	// to be sent wait in the relay, counted by MaxInFlight and MaxInFlightBytes. Room
	// that frees goes to those waiting rows first, as much of it as they need, then to
	// newly claimed rows. Hooks here see every destination's sends. Default: sender's
	// defaults.
	Sender *sender.Options

	// SenderHooks, when not nil, returns hooks for the sender of one destination, added
	// after Sender.Hooks: the place for a per-entity hook such as OpenTelemetry's
	// (sbotel's Telemetry.Sender(destination)), which then traces and counts the relay's
	// sends. Default: none.
	SenderHooks func(destination string) []sender.Hook

	// Owner names this relay: it is the application_name of the relay's connections, so
	// that pg_stat_activity (and pg_locks through it) shows which relay holds which rows.
	// Default: "<hostname>:<pid>:<random>".
	Owner string

	// Lease bounds a claim. A claim is a transaction that holds its rows' locks (FOR
	// UPDATE) while they are sent, and deletes or updates them when their outcomes are
	// known; other relays skip locked rows. The relay stops sending a claim's rows half a
	// Lease after it made the claim (rows whose requests are cut then are retried; rows
	// no request carried yet, in the relay or waiting in a sender, are released, with no
	// attempt charged), and
	// PostgreSQL ends a claim's transaction on which the relay stayed silent for a whole
	// Lease (idle_in_transaction_session_timeout, set for the claim's transaction), so a
	// relay that is alive but stuck gives its rows up after a Lease, when nothing of
	// them is in flight any more. A relay that crashed, or whose connection broke, gives
	// them up at once (its transaction ends with its connection). Default DefaultLease
	// (30 s); negative is an error (a stuck relay must give its rows up).
	Lease time.Duration

	// ClaimBatch bounds the rows one claim takes. The relay claims no more rows of an
	// order (a session, a transaction) once it holds twice ClaimBatch of them, so that an
	// order whose sends hang cannot take the whole window (a claim that began below that
	// may add up to ClaimBatch more). Default DefaultClaimBatch (512); negative
	// is an error (a claim's rows are held in memory and locked in the database).
	ClaimBatch int

	// MaxInFlight bounds the rows claimed by this relay and not yet marked (sending,
	// waiting for their predecessors, or being marked). Default DefaultMaxInFlight (4096);
	// negative is an error (the rows in flight are held in memory).
	MaxInFlight int

	// MaxInFlightBytes bounds the bytes (bodies and application properties, as stored)
	// of the rows claimed by this relay and not yet marked: a claim reads no row that
	// starts past what is left, and none when nothing is left, so that the memory a
	// relay holds stays bounded whatever the messages' sizes (one row larger than the
	// bound is still claimed, alone). Default DefaultMaxInFlightBytes (64 MiB);
	// negative is an error (the rows in flight are held in memory).
	MaxInFlightBytes int64

	// MaxOpenClaims bounds the claims open at once. Each holds one database connection
	// of the relay's own (made from the outbox pool's configuration, outside the pool, so
	// that a relay never takes the application's connections) until its rows are
	// marked; the relay claims the next rows, those after its own claimed rows included,
	// while earlier claims are being sent. With the LISTEN connection, a relay holds up
	// to MaxOpenClaims + 1 connections. A claim's rows go to the senders after the
	// earlier claims' rows of their destinations, and are released unsent half a Lease
	// after their claim: a destination that drains fewer than about MaxInFlight / (Lease
	// / 2) messages per second (270 with the defaults) has its last claims' rows
	// released and claimed again (no attempt charged); lower MaxOpenClaims there. Default
	// DefaultMaxOpenClaims (8); negative is an error (each claim holds a connection).
	MaxOpenClaims int

	// PollInterval is how often the relay looks for rows when nothing woke it: the
	// fallback when a notification is lost or LISTEN is disabled, and the pace at which
	// rows waiting for a retry are found. Default DefaultPollInterval (1 s); negative is
	// an error (without polling, a lost notification or a due retry could wait forever).
	PollInterval time.Duration

	// DisableListen turns LISTEN off (for a connection pooler in transaction mode, where
	// LISTEN does not work): the relay then finds new rows by polling only. Default false:
	// the relay keeps one connection of its own (outside the pool) listening on
	// [Outbox.Channel].
	DisableListen bool

	// DisableAsyncCommit makes the relay's own writes (the marks that end its claims)
	// wait for their commit to reach disk. Default false: they commit with
	// synchronous_commit off, since losing one in a database crash only makes a relay
	// send a row again with the same MessageID, which duplicate detection drops. Add's
	// transactions are the caller's and are not affected.
	DisableAsyncCommit bool

	// Retry describes the delays between attempts to send a row that failed (the
	// senders retry quick transient failures themselves first; see Sender.Retry). A row
	// whose error is transient ([sbkit.IsTransient]: the broker unreachable, a timeout)
	// is retried for as long as it takes, MaxRetryDelay apart at most, so a broker outage
	// loses nothing; so is a row whose destination sender was closed by the application
	// (CodeClosed: its next attempt goes through a new sender from [Destinations]). A
	// row whose error is permanent ([sbkit.IsPermanent]: too large, entity not found,
	// unauthorized) is dead-lettered at once, unless the sender's link failed after the
	// broker had accepted sends of it (the entity deleted, perhaps re-created): that row
	// is retried once through a new sender first. A row whose error is neither is
	// dead-lettered after MaxRetries retries. Default: MaxRetries DefaultMaxRetries (10),
	// RetryDelay DefaultRetryDelay (1 s), MaxRetryDelay DefaultMaxRetryDelay (1 min).
	Retry sbkit.RetryOptions

	// ShutdownGrace is how long the rows in flight may finish after Run's context ends
	// (see Run). Default DefaultShutdownGrace (5 s); negative waits for them without
	// limit: their sends end within half a Lease anyway (see Lease), and their marks
	// when the database answers. [Relay.Close] keeps explicit control: its context is
	// the grace then.
	ShutdownGrace time.Duration

	// Hooks observe the relay; each implements any of [RelayResultHook] and
	// [RelayErrorHook] (one that implements neither, or nil, is an error). Default: none.
	Hooks []Hook

	// Logger receives database errors, retries and dead-letterings (ids, never
	// payloads). Default: nil, which discards.
	Logger *slog.Logger
}

// relayRetryDefaults is the default of RelayOptions.Retry.
var relayRetryDefaults = retry.Policy{MaxRetries: DefaultMaxRetries, RetryDelay: DefaultRetryDelay, MaxRetryDelay: DefaultMaxRetryDelay}

func (o *RelayOptions) withDefaults() (RelayOptions, error) {
	var v RelayOptions
	if o != nil {
		v = *o
	}
	var bad string
	switch {
	case v.Lease < 0:
		bad = fmt.Sprintf("Lease %v", v.Lease)
	case v.ClaimBatch < 0:
		bad = fmt.Sprintf("ClaimBatch %d", v.ClaimBatch)
	case v.MaxInFlight < 0:
		bad = fmt.Sprintf("MaxInFlight %d", v.MaxInFlight)
	case v.MaxInFlightBytes < 0:
		bad = fmt.Sprintf("MaxInFlightBytes %d", v.MaxInFlightBytes)
	case v.MaxOpenClaims < 0:
		bad = fmt.Sprintf("MaxOpenClaims %d", v.MaxOpenClaims)
	case v.PollInterval < 0:
		bad = fmt.Sprintf("PollInterval %v", v.PollInterval)
	}
	if bad != "" {
		return v, fmt.Errorf("%w: negative %s", ErrInvalidOptions, bad)
	}
	if err := ihooks.Check(v.Hooks, isHook, hookNames); err != nil {
		return v, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if v.Lease == 0 {
		v.Lease = DefaultLease
	}
	if v.ClaimBatch == 0 {
		v.ClaimBatch = DefaultClaimBatch
	}
	if v.MaxInFlight == 0 {
		v.MaxInFlight = DefaultMaxInFlight
	}
	if v.MaxInFlightBytes == 0 {
		v.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if v.MaxOpenClaims == 0 {
		v.MaxOpenClaims = DefaultMaxOpenClaims
	}
	if v.PollInterval == 0 {
		v.PollInterval = DefaultPollInterval
	}
	if v.ShutdownGrace == 0 {
		v.ShutdownGrace = DefaultShutdownGrace
	}
	if v.Owner == "" {
		host, _ := os.Hostname()
		v.Owner = host + ":" + strconv.Itoa(os.Getpid()) + ":" + sbkit.NewMessageID()[:8]
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	var so sender.Options
	if v.Sender != nil {
		so = *v.Sender
	}
	so.Ordered = true
	if so.AttemptTimeout == 0 {
		so.AttemptTimeout = v.Lease / 4
	}
	v.Sender = &so
	return v, nil
}
