package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/deadletter"
)

func runDLQ(ctx context.Context, verb string, args []string, env func(string) string, ios ioStreams) error {
	switch verb {
	case "summary":
		return dlqSummary(ctx, args, env, ios)
	case "list":
		return dlqList(ctx, args, env, ios)
	case "export":
		return dlqExport(ctx, args, env, ios)
	case "import":
		return dlqImport(ctx, args, env, ios)
	case "redrive":
		return dlqRedrive(ctx, args, env, ios)
	case "purge":
		return dlqPurge(ctx, args, env, ios)
	case "-h", "--help", "help":
		fmt.Fprint(ios.out, usage)
		return flag.ErrHelp
	}
	return usagef("unknown dlq command %q (summary, list, export, import, redrive, purge)", verb)
}

// dlqReceiver opens a receiver of the entity's dead-letter queue (or of the entity itself
// when main is set).
func dlqReceiver(cl *azservicebus.Client, c *common, mode azservicebus.ReceiveMode, main bool) (*azservicebus.Receiver, error) {
	o := &azservicebus.ReceiverOptions{ReceiveMode: mode}
	if !main {
		o.SubQueue = azservicebus.SubQueueDeadLetter
	}
	if c.topic != "" {
		return cl.NewReceiverForSubscription(c.topic, c.sub, o)
	}
	return cl.NewReceiverForQueue(c.queue, o)
}

// parseFiltered parses args into fs, checks that the flags name a queue or a topic's
// subscription, and returns the filter the filter flags describe (nil: every message).
func parseFiltered(fs *flag.FlagSet, args []string, c *common, ff *filterFlags) (*deadletter.Filter, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.entity(true); err != nil {
		return nil, err
	}
	return ff.filter()
}

// openReceiver connects as c says and opens a receiver of its entity's dead-letter queue
// (of the entity itself when main is set); closeAll closes the receiver, then the client.
func openReceiver(ctx context.Context, c *common, mode azservicebus.ReceiveMode, main bool) (cl *azservicebus.Client, r *azservicebus.Receiver, closeAll func(), err error) {
	if cl, err = c.client(); err != nil {
		return nil, nil, nil, err
	}
	if r, err = dlqReceiver(cl, c, mode, main); err != nil {
		_ = cl.Close(context.WithoutCancel(ctx))
		return nil, nil, nil, err
	}
	return cl, r, func() {
		_ = r.Close(context.WithoutCancel(ctx))
		_ = cl.Close(context.WithoutCancel(ctx))
	}, nil
}

// deadLetterCount asks the administration API for the entity's dead-letter count, for
// the progress line's ETA; 0 when it cannot (no Manage right, an emulator without it).
func deadLetterCount(ctx context.Context, c *common) int64 {
	adm, err := c.adminClient()
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.topic != "" {
		r, err := adm.GetSubscriptionRuntimeProperties(ctx, c.topic, c.sub, nil)
		if err != nil || r == nil {
			return 0
		}
		return int64(r.DeadLetterMessageCount)
	}
	r, err := adm.GetQueueRuntimeProperties(ctx, c.queue, nil)
	if err != nil || r == nil {
		return 0
	}
	return int64(r.DeadLetterMessageCount)
}

// report writes an operation's Stats and turns them into the error that picks the exit
// code: nil when everything asked was done.
func report(verb string, c *common, st deadletter.Stats, opErr error, dryRun bool, ios ioStreams) error {
	if c.json {
		errs := make([]string, len(st.Errors))
		for i, e := range st.Errors {
			errs[i] = e.Error()
		}
		out := map[string]any{
			"command": verb, "entity": c.name(), "dryRun": dryRun,
			"seen": st.Seen, "moved": st.Moved, "skipped": st.Skipped, "failed": st.Failed,
			"completeFailed": st.CompleteFailed, "stopped": st.Stopped, "errors": errs,
			"elapsedSeconds": st.Elapsed.Seconds(),
		}
		if opErr != nil {
			out["error"] = opErr.Error()
		}
		_ = json.NewEncoder(ios.out).Encode(out)
	} else {
		would := ""
		if dryRun {
			would = " (dry run: nothing changed; moved = would move)"
		}
		fmt.Fprintf(ios.out, "%s %s: seen %d, moved %d, skipped %d, failed %d; stopped: %s; %s%s\n",
			verb, c.name(), st.Seen, st.Moved, st.Skipped, st.Failed, st.Stopped, st.Elapsed.Round(time.Millisecond), would)
		if st.CompleteFailed > 0 {
			fmt.Fprintf(ios.out, "  %d copies were accepted but their dead letters could not be completed: they are still in the dead-letter queue, and a later re-drive sends them again (the destination drops the second copy only when it has duplicate detection on)\n", st.CompleteFailed)
		}
		for _, e := range st.Errors {
			fmt.Fprintf(ios.out, "  failed: %v\n", e)
		}
	}
	switch {
	case errors.Is(opErr, deadletter.ErrPermanentFailure):
		return partialError{msg: opErr.Error(), permanent: true}
	case opErr != nil:
		return opErr
	case st.Failed > 0 || st.CompleteFailed > 0:
		return partialError{msg: fmt.Sprintf("%d messages failed, %d copies left beside their dead letters", st.Failed, st.CompleteFailed)}
	}
	return nil
}

func dlqSummary(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq summary --queue Q | --topic T --subscription S [filters]",
		"Counts the dead letters by reason, by source and by age, with the oldest and newest. It peeks: nothing is locked or changed.",
		"  sbctl dlq summary --queue orders\n  sbctl dlq summary --topic events --subscription audit --json", ios.err)
	c.register(fs, env)
	ff.register(fs)
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	_, r, closeAll, err := openReceiver(ctx, &c, azservicebus.ReceiveModePeekLock, false)
	if err != nil {
		return err
	}
	defer closeAll()
	s, _, err := deadletter.Summarize(ctx, r, &deadletter.PeekOptions{Filter: filter})
	if err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(ios.out).Encode(map[string]any{"entity": c.name(), "summary": s})
	}
	fmt.Fprintf(ios.out, "%s: %d dead letters, %d bytes\n", c.name(), s.Count, s.Bytes)
	if s.Count > 0 {
		fmt.Fprintf(ios.out, "  oldest %s, newest %s\n", s.Oldest.Format(time.RFC3339), s.Newest.Format(time.RFC3339))
	}
	printCounts(ios.out, "reason", s.ByReason)
	printCounts(ios.out, "source", s.BySource)
	for _, a := range s.ByAge {
		if a.Count > 0 {
			fmt.Fprintf(ios.out, "  age %-6s %d\n", a.Label, a.Count)
		}
	}
	return nil
}

func printCounts(w io.Writer, what string, m map[string]int64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortByCount(keys, m)
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		fmt.Fprintf(w, "  %s %-40s %d\n", what, name, m[k])
	}
}

func sortByCount(keys []string, m map[string]int64) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && (m[keys[j-1]] < m[keys[j]] || (m[keys[j-1]] == m[keys[j]] && keys[j-1] > keys[j])); j-- {
			keys[j-1], keys[j] = keys[j], keys[j-1]
		}
	}
}

func dlqList(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq list --queue Q | --topic T --subscription S [filters] [--max N]",
		"Lists the dead letters that match the filters, in sequence-number order. It peeks: nothing is locked or changed. With --json each line is an export record (every field).",
		"  sbctl dlq list --queue orders --reason MaxDeliveryCountExceeded --max 20\n  sbctl dlq list --queue orders --property tenant=42 --json", ios.err)
	c.register(fs, env)
	ff.register(fs)
	max := fs.Int("max", 0, "list at most `N` messages (0: all)")
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	if *max < 0 {
		return usagef("--max %d: negative", *max)
	}
	_, r, closeAll, err := openReceiver(ctx, &c, azservicebus.ReceiveModePeekLock, false)
	if err != nil {
		return err
	}
	defer closeAll()
	return printMessages(ctx, r, &c, filter, *max, ios)
}

// printMessages peeks at r and prints the messages that match.
func printMessages(ctx context.Context, r deadletter.Peeker, c *common, filter *deadletter.Filter, max int, ios ioStreams) error {
	bw := bufio.NewWriter(ios.out)
	defer bw.Flush()
	enc := json.NewEncoder(bw)
	_, err := deadletter.List(ctx, r, &deadletter.PeekOptions{Filter: filter, MaxMessages: max}, func(m *azservicebus.ReceivedMessage) error {
		if c.json {
			rec, err := deadletter.NewRecord(m)
			if err != nil {
				return err
			}
			return enc.Encode(rec)
		}
		seq, when := int64(0), ""
		if m.SequenceNumber != nil {
			seq = *m.SequenceNumber
		}
		if m.EnqueuedTime != nil {
			when = m.EnqueuedTime.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(bw, "%d\t%s\t%s\t%s\t%s\t%d bytes\n", seq, when, m.MessageID, deref(m.DeadLetterReason), oneLine(deref(m.DeadLetterErrorDescription)), len(m.Body))
		return nil
	})
	return err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func dlqExport(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq export --queue Q | --topic T --subscription S [filters] [-o FILE] [--move]",
		"Writes the dead letters that match as JSON Lines (one record per message: body, properties with their types, system properties). By peek, nothing changes; with --move each page is completed only after it was written and synced, so a crash loses nothing (at worst a message is both in the file and still in the queue).",
		"  sbctl dlq export --queue orders -o orders-dlq.jsonl\n  sbctl dlq export --queue orders --reason Poison --move -o poison.jsonl", ios.err)
	c.register(fs, env)
	ff.register(fs)
	out := fs.String("o", "", "write to `FILE` (default standard output)")
	move := fs.Bool("move", false, "receive and complete what was written (the dead letters leave the queue)")
	dry := fs.Bool("dry-run", false, "with --move: count what would move, change nothing")
	max := fs.Int("max", 0, "export at most `N` messages (0: all)")
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	if *max < 0 {
		return usagef("--max %d: negative", *max)
	}
	_, r, closeAll, err := openReceiver(ctx, &c, azservicebus.ReceiveModePeekLock, false)
	if err != nil {
		return err
	}
	defer closeAll()
	if *dry {
		st, err := deadletter.List(ctx, r, &deadletter.PeekOptions{Filter: filter, MaxMessages: *max}, func(*azservicebus.ReceivedMessage) error { return nil })
		return report("export", &c, st, err, true, ios)
	}
	var w io.Writer = ios.out
	statsOut := ios
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	} else {
		statsOut.out = ios.err // the records go to standard output
	}
	var total int64
	p := newProgress(ios.err, "export", 0)
	if p != nil {
		total = deadLetterCount(ctx, &c)
		p.total = total
	}
	opts := &deadletter.ExportOptions{Filter: filter, MaxMessages: *max, Hooks: p.hooks()}
	var st deadletter.Stats
	if *move {
		bw := bufio.NewWriter(w)
		st, err = deadletter.ExportAndComplete(ctx, r, syncWriter{bw, w}, opts)
	} else {
		st, err = deadletter.Export(ctx, r, w, opts)
	}
	return report("export", &c, st, err, false, statsOut)
}

// syncWriter flushes its buffer and syncs the file under it (when it is one) at Sync.
type syncWriter struct {
	*bufio.Writer
	under io.Writer
}

func (s syncWriter) Sync() error {
	if err := s.Flush(); err != nil {
		return err
	}
	if f, ok := s.under.(*os.File); ok {
		if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !strings.Contains(err.Error(), "invalid argument") {
			return err
		}
	}
	return nil
}

func dlqImport(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq import --queue Q | --topic T [-i FILE] [filters]",
		"Sends the records of an export (JSON Lines) to a queue or topic, pipelined and batched. MessageIDs are kept, so a destination with duplicate detection drops a second import. The dead-letter reason and description are left out unless --keep-dead-letter-properties.",
		"  sbctl dlq import --queue orders-replay -i orders-dlq.jsonl\n  sbctl dlq import --queue orders --reason Poison -i poison.jsonl --dry-run", ios.err)
	c.register(fs, env)
	ff.register(fs)
	in := fs.String("i", "", "read from `FILE` (default standard input)")
	dry := fs.Bool("dry-run", false, "read and check the records, send nothing")
	stop := fs.Bool("stop-on-failure", false, "stop at the first message that fails for good")
	keep := fs.Bool("keep-dead-letter-properties", false, "send DeadLetterReason and DeadLetterErrorDescription as exported")
	max := fs.Int("max", 0, "send at most `N` records (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.entity(false); err != nil {
		return err
	}
	if c.sub != "" {
		return usagef("import sends to a queue or a topic: drop --subscription")
	}
	filter, err := ff.filter()
	if err != nil {
		return err
	}
	var r io.Reader = ios.in
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var dst *azservicebus.Sender
	if !*dry {
		cl, err := c.client()
		if err != nil {
			return err
		}
		defer cl.Close(context.WithoutCancel(ctx))
		if dst, err = cl.NewSender(c.name(), nil); err != nil {
			return err
		}
		defer dst.Close(context.WithoutCancel(ctx))
	}
	p := newProgress(ios.err, "import", 0)
	var sender interface {
		SendMessage(context.Context, *azservicebus.Message, *azservicebus.SendMessageOptions) error
	}
	if dst != nil {
		sender = dst
	}
	st, err := deadletter.Import(ctx, r, sender, &deadletter.ImportOptions{Filter: filter, DryRun: *dry, StopOnPermanentFailure: *stop,
		KeepDeadLetterProperties: *keep, MaxMessages: *max, Hooks: p.hooks()})
	return report("import", &c, st, err, *dry, ios)
}

func dlqRedrive(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq redrive --queue Q | --topic T --subscription S [filters] [--to DEST]",
		`Sends a copy of each dead letter that matches back to its entity (or to --to), pipelined and batched,
and completes the dead letter only after the broker accepted the copy. The copy keeps the body,
MessageID, SessionID, PartitionKey, CorrelationID, Subject, To, ReplyTo, TTL and properties, drops
the dead-letter reason and description and counts the re-drive (sbkit_redrive_count). A copy that
fails leaves its dead letter where it was. A subscription's dead letters go to its topic, which
delivers them to every subscription whose rules match: --apply-rules first guards the topic's rules
so that they reach this subscription only (each subscription's filters ANDed with
"sbkit_redrive_subscription IS NULL OR sbkit_redrive_subscription = '<its name>'", plus a rule
sbkit-redrive on this one); --all-subscriptions accepts the fan-out instead.`,
		"  sbctl dlq redrive --queue orders --dry-run\n  sbctl dlq redrive --queue orders --reason MaxDeliveryCountExceeded --rate 500 --stop-on-failure\n  sbctl dlq redrive --queue orders --to orders-retry --max 100\n  sbctl dlq redrive --topic events --subscription audit --apply-rules", ios.err)
	c.register(fs, env)
	ff.register(fs)
	to := fs.String("to", "", "send the copies to this queue or topic `DEST` (default: the entity itself, or its topic)")
	dry := fs.Bool("dry-run", false, "count what would move (by peek), change nothing")
	stop := fs.Bool("stop-on-failure", false, "stop at the first copy that fails for good (exit 4)")
	rate := fs.Float64("rate", 0, "send at most `N` messages per second (0: no limit)")
	max := fs.Int("max", 0, "re-drive at most `N` messages (0: all)")
	idle := fs.Duration("idle-timeout", deadletter.DefaultIdleTimeout, "stop when the queue gave nothing for this `long`")
	applyRules := fs.Bool("apply-rules", false, "subscription: guard the topic's rules so that the copies reach this subscription only")
	allSubs := fs.Bool("all-subscriptions", false, "subscription: send to the topic without guarding its rules (every matching subscription gets a copy)")
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	if *max < 0 || *rate < 0 || *idle < 0 {
		return usagef("--max, --rate and --idle-timeout must not be negative")
	}
	dest := *to
	subTarget := ""
	if dest == "" {
		dest = c.queue
		if c.topic != "" {
			dest = c.topic
			subTarget = c.sub
		}
	}
	if subTarget != "" && !*applyRules && !*allSubs {
		return usagef("re-driving %s sends the copies to topic %s, which gives one to every subscription whose rules match: add --apply-rules to guard the rules so that only %s gets them, --all-subscriptions to accept the fan-out, or --to another entity", c.name(), c.topic, c.sub)
	}
	if *applyRules {
		if subTarget == "" {
			return usagef("--apply-rules goes with --topic and --subscription, without --to")
		}
		if err := guardTopic(ctx, &c, subTarget, *dry, ios); err != nil {
			return err
		}
	}
	if *allSubs && !*applyRules {
		subTarget = "" // no guard rules to route on the property
	}
	cl, r, closeAll, err := openReceiver(ctx, &c, azservicebus.ReceiveModePeekLock, false)
	if err != nil {
		return err
	}
	defer closeAll()
	s, err := cl.NewSender(dest, nil)
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))
	var total int64
	p := newProgress(ios.err, "redrive", 0)
	if p != nil {
		total = deadLetterCount(ctx, &c)
		p.total = total
	}
	st, err := deadletter.Redrive(ctx, r, s, &deadletter.RedriveOptions{Filter: filter, MaxMessages: *max, Rate: *rate, DryRun: *dry,
		StopOnPermanentFailure: *stop, Subscription: subTarget, IdleTimeout: *idle, Hooks: p.hooks()})
	return report("redrive", &c, st, err, *dry, ios)
}

// guardTopic rewrites the rules of every subscription of c.topic with
// deadletter.GuardRules and gives target deadletter.RedriveRule, through the
// administration API; with dryRun it only prints what it would change.
func guardTopic(ctx context.Context, c *common, target string, dryRun bool, ios ioStreams) error {
	adm, err := c.adminClient()
	if err != nil {
		return err
	}
	subs := adm.NewListSubscriptionsPager(c.topic, nil)
	var names []string
	for subs.More() {
		page, err := subs.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list the subscriptions of %s: %w", c.topic, err)
		}
		for _, s := range page.Subscriptions {
			names = append(names, s.SubscriptionName)
		}
	}
	for _, sub := range names {
		var rules []admin.RuleProperties
		pager := adm.NewListRulesPager(c.topic, sub, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list the rules of %s/%s: %w", c.topic, sub, err)
			}
			rules = append(rules, page.Rules...)
		}
		guarded, _, err := deadletter.GuardRules(sub, rules)
		if err != nil {
			return err
		}
		for i, r := range guarded {
			if r.Filter == rules[i].Filter {
				continue
			}
			fmt.Fprintf(ios.err, "rule %s/%s: filter becomes %s\n", sub, r.Name, r.Filter.(*admin.SQLFilter).Expression)
			if !dryRun {
				if _, err := adm.UpdateRule(ctx, c.topic, sub, r); err != nil {
					return fmt.Errorf("update rule %s of %s/%s: %w", r.Name, c.topic, sub, err)
				}
			}
		}
		if sub != target {
			continue
		}
		has := false
		for _, r := range rules {
			has = has || r.Name == deadletter.RedriveRuleName
		}
		if !has {
			rr := deadletter.RedriveRule(target)
			fmt.Fprintf(ios.err, "rule %s/%s: created with filter %s\n", sub, rr.Name, rr.Filter.(*admin.SQLFilter).Expression)
			if !dryRun {
				if _, err := adm.CreateRule(ctx, c.topic, sub, &admin.CreateRuleOptions{Name: &rr.Name, Filter: rr.Filter}); err != nil {
					return fmt.Errorf("create rule %s on %s/%s: %w", rr.Name, c.topic, sub, err)
				}
			}
		}
	}
	return nil
}

func dlqPurge(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("dlq purge --queue Q | --topic T --subscription S [filters] [--sequence-numbers N,M]",
		"Deletes dead letters: all of them by receive-and-delete, or with filters only those that match (peek-lock, complete). --sequence-numbers deletes deferred dead letters, which no receive reaches otherwise.",
		"  sbctl dlq purge --queue orders --reason TTLExpiredException --dry-run\n  sbctl dlq purge --queue orders --enqueued-before 2026-01-01T00:00:00Z\n  sbctl dlq purge --queue orders --sequence-numbers 42,43", ios.err)
	c.register(fs, env)
	ff.register(fs)
	dry := fs.Bool("dry-run", false, "count what would be deleted (by peek), change nothing")
	max := fs.Int("max", 0, "delete at most `N` messages (0: all)")
	seqs := fs.String("sequence-numbers", "", "delete these deferred messages: `N,M,...`")
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	if *max < 0 {
		return usagef("--max %d: negative", *max)
	}
	var seqNums []int64
	if *seqs != "" {
		for _, s := range strings.Split(*seqs, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return usagef("--sequence-numbers: %q is not a number", s)
			}
			seqNums = append(seqNums, n)
		}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close(context.WithoutCancel(ctx))
	mode := azservicebus.ReceiveModePeekLock
	if filter == nil && len(seqNums) == 0 && !*dry {
		mode = azservicebus.ReceiveModeReceiveAndDelete
	}
	r, err := dlqReceiver(cl, &c, mode, false)
	if err != nil {
		return err
	}
	defer r.Close(context.WithoutCancel(ctx))
	p := newProgress(ios.err, "purge", 0)
	st, err := deadletter.Purge(ctx, r, &deadletter.PurgeOptions{Filter: filter, MaxMessages: *max, DryRun: *dry, SequenceNumbers: seqNums,
		ReceiveAndDelete: mode == azservicebus.ReceiveModeReceiveAndDelete, Hooks: p.hooks()})
	return report("purge", &c, st, err, *dry, ios)
}
