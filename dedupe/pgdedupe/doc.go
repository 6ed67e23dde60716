// Package pgdedupe keeps sbkit's duplicate-skipping state in PostgreSQL (pgx v5), in two
// ways:
//
//   - Store is a [dedupe.Store] (leases with owner tokens and expiry, done marks with a
//     window) for workers that share a database but not a Redis: use it with
//     [dedupe.New] like any other store.
//   - TxFilter runs the handler inside a database transaction (read it with [TxFrom])
//     and writes the message's done mark in that same transaction, so "the work
//     happened" and "the message is marked done" commit together or not at all. A
//     redelivery after the commit (Complete lost, crash after commit) is completed
//     without running the handler; an error or crash before the commit leaves nothing
//     behind, and the redelivery runs the work again.
//
// Both use one table (see [Store.CreateSchema]):
//
//	CREATE TABLE sbkit_dedupe (
//	    key        text PRIMARY KEY,     -- "<entity>:<MessageId>"
//	    owner      text,                 -- lease owner; NULL for a done mark
//	    done       boolean NOT NULL,     -- a done mark (true) or a processing lease
//	    expires_at timestamptz NOT NULL  -- the entry is absent after this instant
//	);
//	CREATE INDEX sbkit_dedupe_expires_at ON sbkit_dedupe (expires_at);
//
// Expiry is read from the database's clock (now()), so workers with skewed clocks agree.
// Expired rows behave as absent and are replaced in place; [Store.DeleteExpired] removes
// them in small batches. The module is separate from sbkit's core so that importing sbkit
// never pulls a database driver.
package pgdedupe
