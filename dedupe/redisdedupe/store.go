// Package redisdedupe is a [dedupe.Store] in Redis, shared by every worker that receives
// from an entity, on any number of machines.
//
// Each key holds one string with a TTL: "L<owner>" while a processing lease is held
// (created with SET NX PX, so exactly one worker acquires it), "D" once the message is
// done. Reacquiring, marking done and releasing run as Lua scripts that compare the owner
// token first, so one worker can never release or overwrite another worker's lease. Every
// script touches a single key, so the store works on Redis Cluster too.
//
// It lives in its own module (github.com/sbkit/sbkit/dedupe/redisdedupe) so that the core
// module does not depend on a Redis client.
package redisdedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sbkit/sbkit/dedupe"
)

// DefaultPrefix is Options.Prefix' default.
const DefaultPrefix = "sbkit:dedupe:"

var (
	// ErrNilClient is returned by New for a nil client.
	ErrNilClient = errors.New("redisdedupe: nil client")
	// ErrUnexpectedReply is wrapped when a script returns something it never returns.
	ErrUnexpectedReply = errors.New("redisdedupe: unexpected reply")
)

// Options configures a Store. nil options mean defaults.
type Options struct {
	// Prefix is prepended to every key, so that the store's keys are recognisable and
	// several applications can share a database. Default (""): DefaultPrefix.
	Prefix string
}

// Store is a [dedupe.Store] backed by Redis. It is safe for concurrent use by many
// goroutines and many processes. It does not own the client: closing the client is the
// caller's business, and Store needs no Close. Make one with New.
//
// Errors are the client's (network, timeouts, the context's), wrapped with the
// operation's name, and [dedupe.ErrInvalidArgument] / [dedupe.ErrNotOwner] as documented by
// [dedupe.Store]. Durations are rounded up to whole milliseconds.
type Store struct {
	client redis.Scripter
	prefix string
}

// New returns a Store that uses client: a [*redis.Client], [*redis.ClusterClient],
// [*redis.Ring] or anything else that can run scripts. It returns ErrNilClient for a nil
// client.
func New(client redis.Scripter, opts *Options) (*Store, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	prefix := DefaultPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	return &Store{client: client, prefix: prefix}, nil
}

// acquireScript: KEYS[1] key; ARGV[1] lease value "L<owner>"; ARGV[2] lease in ms.
// Returns 1 acquired, 2 in progress, 3 done.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if v == 'D' then return 3 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 2
`)

// markScript: KEYS[1] key; ARGV[1] lease value; ARGV[2] window in ms.
// Returns 1 marked (or already done), 0 leased by another owner.
var markScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == 'D' then return 1 end
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'D', 'PX', ARGV[2])
return 1
`)

// releaseScript: KEYS[1] key; ARGV[1] lease value. Returns 1 released, 0 nothing to do.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`)

// Acquire implements [dedupe.Store].
func (s *Store) Acquire(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if err := dedupe.CheckArgs(key, owner, lease); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := acquireScript.Run(ctx, s.client, []string{s.prefix + key}, "L"+owner, millis(lease)).Int64()
	if err != nil {
		return 0, fmt.Errorf("redisdedupe: acquire %q: %w", key, err)
	}
	switch n {
	case 1:
		return dedupe.Acquired, nil
	case 2:
		return dedupe.InProgress, nil
	case 3:
		return dedupe.Done, nil
	}
	return 0, fmt.Errorf("%w: acquire %q returned %d", ErrUnexpectedReply, key, n)
}

// MarkDone implements [dedupe.Store].
func (s *Store) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	if err := dedupe.CheckArgs(key, owner, window); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := markScript.Run(ctx, s.client, []string{s.prefix + key}, "L"+owner, millis(window)).Int64()
	if err != nil {
		return fmt.Errorf("redisdedupe: mark done %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("redisdedupe: mark done %q: %w", key, dedupe.ErrNotOwner)
	}
	return nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, key, owner string) error {
	if err := dedupe.CheckArgs(key, owner, 1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, s.client, []string{s.prefix + key}, "L"+owner).Err(); err != nil {
		return fmt.Errorf("redisdedupe: release %q: %w", key, err)
	}
	return nil
}

// millis rounds d up to whole milliseconds, at least 1.
func millis(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}

var _ dedupe.Store = (*Store)(nil)
