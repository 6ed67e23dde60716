package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sender"
)

func runPeek(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	var ff filterFlags
	fs := newFlagSet("peek --queue Q | --topic T --subscription S [--dlq] [--max N]",
		"Prints messages without locking them (DeliveryCount does not change). With --json each line is an export record.",
		"  sbctl peek --queue orders --max 5\n  sbctl peek --topic events --subscription audit --dlq --json", ios.err)
	c.register(fs, env)
	ff.register(fs)
	dlq := fs.Bool("dlq", false, "peek at the dead-letter queue")
	max := fs.Int("max", 10, "print at most `N` messages (0: all)")
	filter, err := parseFiltered(fs, args, &c, &ff)
	if err != nil {
		return err
	}
	if *max < 0 {
		return usagef("--max %d: negative", *max)
	}
	_, r, closeAll, err := openReceiver(ctx, &c, azservicebus.ReceiveModePeekLock, !*dlq)
	if err != nil {
		return err
	}
	defer closeAll()
	return printMessages(ctx, r, &c, filter, *max, ios)
}

func runSend(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	fs := newFlagSet("send --queue Q | --topic T --body TEXT [--count N]",
		"Sends messages through sbkit's pipelined, batched sender. (To send exported records, use dlq import.)",
		"  sbctl send --queue orders --body '{\"id\":1}' --content-type application/json\n  sbctl send --queue jobs --session-id s1 --body hi --count 100 --property tenant=42", ios.err)
	c.register(fs, env)
	body := fs.String("body", "", "the message body")
	contentType := fs.String("content-type", "", "ContentType")
	sessionID := fs.String("session-id", "", "SessionID")
	messageID := fs.String("message-id", "", "MessageID (with --count, suffixed -1, -2, ...; default: random)")
	subject := fs.String("subject", "", "Subject")
	ttl := fs.Duration("ttl", 0, "TimeToLive (0: the entity's default)")
	count := fs.Int("count", 1, "send `N` copies")
	dry := fs.Bool("dry-run", false, "build the messages, send nothing")
	var props stringList
	fs.Var(&props, "property", "application property `NAME=VALUE` (a string; repeat for several)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.entity(false); err != nil {
		return err
	}
	if c.sub != "" {
		return usagef("send goes to a queue or a topic: drop --subscription")
	}
	if *count < 1 || *ttl < 0 {
		return usagef("--count must be at least 1 and --ttl not negative")
	}
	appProps := map[string]any{}
	for _, p := range props {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return usagef("--property %q: want NAME=VALUE", p)
		}
		appProps[k] = v
	}
	msgs := make([]*azservicebus.Message, *count)
	for i := range msgs {
		m := &azservicebus.Message{Body: []byte(*body)}
		if len(appProps) > 0 {
			m.ApplicationProperties = appProps
		}
		for _, f := range []struct {
			v   string
			dst **string
		}{{*contentType, &m.ContentType}, {*sessionID, &m.SessionID}, {*subject, &m.Subject}} {
			if f.v != "" {
				v := f.v
				*f.dst = &v
			}
		}
		if *messageID != "" {
			id := *messageID
			if *count > 1 {
				id = fmt.Sprintf("%s-%d", id, i+1)
			}
			m.MessageID = &id
		}
		if *ttl > 0 {
			d := *ttl
			m.TimeToLive = &d
		}
		msgs[i] = m
	}
	start := time.Now()
	if *dry {
		return sendReport(&c, len(msgs), 0, start, true, ios)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close(context.WithoutCancel(ctx))
	dst, err := cl.NewSender(c.name(), nil)
	if err != nil {
		return err
	}
	defer dst.Close(context.WithoutCancel(ctx))
	s, err := sender.New(dst, nil)
	if err != nil {
		return err
	}
	err = s.SendAll(ctx, msgs)
	_ = s.Close(context.WithoutCancel(ctx))
	st := s.Stats()
	if rerr := sendReport(&c, int(st.Sent), int(st.Failed+st.Rejected), start, false, ios); rerr != nil {
		return rerr
	}
	return err
}

func sendReport(c *common, sent, failed int, start time.Time, dry bool, ios ioStreams) error {
	if c.json {
		_ = json.NewEncoder(ios.out).Encode(map[string]any{"command": "send", "entity": c.name(), "dryRun": dry, "sent": sent, "failed": failed, "elapsedSeconds": time.Since(start).Seconds()})
	} else if dry {
		fmt.Fprintf(ios.out, "send %s: %d messages built (dry run: nothing sent)\n", c.name(), sent)
	} else {
		fmt.Fprintf(ios.out, "send %s: %d sent, %d failed; %s\n", c.name(), sent, failed, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return partialError{msg: fmt.Sprintf("%d messages failed", failed)}
	}
	return nil
}

// entityStats is one line of `sbctl stats`.
type entityStats struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Active     int32  `json:"active"`
	DeadLetter int32  `json:"deadLetter"`
	Scheduled  int32  `json:"scheduled"`
	Transfer   int32  `json:"transfer,omitempty"`
	TransferDL int32  `json:"transferDeadLetter,omitempty"`
	Total      int64  `json:"total"`
	SizeBytes  int64  `json:"sizeBytes"`
}

func runStats(ctx context.Context, args []string, env func(string) string, ios ioStreams) error {
	var c common
	fs := newFlagSet("stats [--queue Q | --topic T]",
		"Prints the administration API's runtime counts of every queue, topic and subscription (or of one queue or topic): active, dead-lettered, scheduled and total messages, and size.",
		"  sbctl stats\n  sbctl stats --json | jq 'select(.deadLetter > 0)'", ios.err)
	c.register(fs, env)
	if err := parse(fs, args); err != nil {
		return err
	}
	adm, err := c.adminClient()
	if err != nil {
		return err
	}
	var rows []entityStats
	if c.topic == "" {
		qp := adm.NewListQueuesRuntimePropertiesPager(nil)
		for qp.More() {
			page, err := qp.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list queues: %w", err)
			}
			for _, q := range page.QueueRuntimeProperties {
				if c.queue != "" && !strings.EqualFold(q.QueueName, c.queue) {
					continue
				}
				rows = append(rows, entityStats{Kind: "queue", Name: q.QueueName, Active: q.ActiveMessageCount, DeadLetter: q.DeadLetterMessageCount,
					Scheduled: q.ScheduledMessageCount, Transfer: q.TransferMessageCount, TransferDL: q.TransferDeadLetterMessageCount,
					Total: q.TotalMessageCount, SizeBytes: q.SizeInBytes})
			}
		}
	}
	if c.queue == "" {
		tp := adm.NewListTopicsRuntimePropertiesPager(nil)
		for tp.More() {
			page, err := tp.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			for _, t := range page.TopicRuntimeProperties {
				if c.topic != "" && !strings.EqualFold(t.TopicName, c.topic) {
					continue
				}
				rows = append(rows, entityStats{Kind: "topic", Name: t.TopicName, Scheduled: t.ScheduledMessageCount, SizeBytes: t.SizeInBytes})
				sp := adm.NewListSubscriptionsRuntimePropertiesPager(t.TopicName, nil)
				for sp.More() {
					spage, err := sp.NextPage(ctx)
					if err != nil {
						return fmt.Errorf("list the subscriptions of %s: %w", t.TopicName, err)
					}
					for _, s := range spage.SubscriptionRuntimeProperties {
						rows = append(rows, entityStats{Kind: "subscription", Name: t.TopicName + "/" + s.SubscriptionName, Active: s.ActiveMessageCount,
							DeadLetter: s.DeadLetterMessageCount, Transfer: s.TransferMessageCount, TransferDL: s.TransferDeadLetterMessageCount, Total: s.TotalMessageCount})
					}
				}
			}
		}
	}
	if c.json {
		enc := json.NewEncoder(ios.out)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(ios.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "KIND\tNAME\tACTIVE\tDEAD-LETTER\tSCHEDULED\tTOTAL\tBYTES\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", r.Kind, r.Name, r.Active, r.DeadLetter, r.Scheduled, r.Total, r.SizeBytes)
	}
	return tw.Flush()
}
