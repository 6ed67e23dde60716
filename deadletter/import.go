package deadletter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sender"
)

// MaxRecordSize bounds one line of an import: the Premium tier's largest message (100
// MB, "Service Bus quotas") as base64 in JSON, with room for its properties.
const MaxRecordSize = 140 << 20

// ImportOptions configures [Import]. A nil *ImportOptions means defaults. Negative
// counts and durations are errors wrapping [ErrInvalidOptions].
type ImportOptions struct {
	// Filter selects the records to send, matched as the message they describe
	// (reference fields included: DeadLetterReason, EnqueuedTime, ...). Default nil:
	// every record.
	Filter *Filter
	// MaxMessages stops after this many records were sent (or failed). Default (zero):
	// no limit.
	MaxMessages int
	// DryRun sends nothing: the records are read and checked, and Stats.Moved counts
	// what would be sent. Default false.
	DryRun bool
	// StopOnPermanentFailure is as in [RedriveOptions].
	StopOnPermanentFailure bool
	// KeepDeadLetterProperties sends the DeadLetterReason and DeadLetterErrorDescription
	// application properties as exported. Default false: they are left out, as a
	// re-drive leaves them out.
	KeepDeadLetterProperties bool
	// Sender configures the [sender.Sender] the messages go through, as in
	// [RedriveOptions]. Default: Ordered.
	Sender *sender.Options
	// ShutdownTimeout bounds the time Import spends, after ctx ended, waiting for the
	// sends in flight. Default DefaultShutdownTimeout (30s).
	ShutdownTimeout time.Duration
	// Hooks observe progress ([ProgressHook]), every DefaultPageSize records. Default none.
	Hooks []Hook
	// Logger receives failures, never payloads. Default: discards everything.
	Logger *slog.Logger
}

// ReadRecord reads one [Record] line, skipping blank lines. It returns io.EOF at the
// end, and an error wrapping [ErrBadRecord] for a line that is not a record.
func ReadRecord(r *bufio.Reader) (*Record, error) {
	rec, _, err := readRecord(r)
	return rec, err
}

// readRecord is ReadRecord that also says how many lines it read.
func readRecord(r *bufio.Reader) (*Record, int, error) {
	lines := 0
	for {
		line, err := readLine(r)
		if len(line) == 0 && err != nil {
			return nil, lines, err
		}
		lines++
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, lines, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, lines, err
			}
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if jerr := dec.Decode(&rec); jerr != nil {
			return nil, lines, fmt.Errorf("%w: %w", ErrBadRecord, jerr)
		}
		return &rec, lines, nil
	}
}

// readLine reads one line of at most MaxRecordSize bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > MaxRecordSize {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrBadRecord, MaxRecordSize)
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// Import reads [Record] lines from r and sends each one that matches the filter to dst
// through a [sender.Sender] (pipelined and batched; records whose body is not one data
// section through dst's SendAMQPAnnotatedMessage, one at a time). The MessageID is kept,
// so a destination with duplicate detection drops a second import of the same file.
//
// A line that is not a record ends the import with an error wrapping [ErrBadRecord]
// that names its line number; the records before it were sent (Stats.Moved), so fix the
// line and import again, from the line after the last one sent, or all of it where the
// destination detects duplicates. When ctx ends, Import stops reading, waits for the
// sends in flight (for at most ShutdownTimeout) and returns ctx's error.
func Import(ctx context.Context, r io.Reader, dst sbkit.MessageSender, opts *ImportOptions) (Stats, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	start := time.Now()
	ro, prog, err := (&RedriveOptions{MaxMessages: o.MaxMessages, ShutdownTimeout: o.ShutdownTimeout, Sender: o.Sender, Hooks: o.Hooks, Logger: o.Logger}).withDefaults()
	if err != nil {
		return Stats{}, err
	}
	if r == nil || (dst == nil && !o.DryRun) {
		return Stats{}, fmt.Errorf("%w: nil reader or sender", ErrInvalidOptions)
	}
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopTimer := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(ro.ShutdownTimeout, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopTimer()

	var snd *sender.Sender
	var amqpDst AMQPSender
	if !o.DryRun {
		if snd, err = sender.New(dst, ro.Sender); err != nil {
			return Stats{}, fmt.Errorf("deadletter: %w", err)
		}
		amqpDst, _ = dst.(AMQPSender)
	}
	var (
		mu        sync.Mutex
		st        Stats
		wg        sync.WaitGroup
		permanent error
	)
	snapshot := func() Stats {
		mu.Lock()
		defer mu.Unlock()
		s := st
		s.Errors = append([]error(nil), st.Errors...)
		s.Elapsed = time.Since(start)
		return s
	}
	outcome := func(id string, line int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			st.Moved++
			return
		}
		st.Failed++
		st.addError(fmt.Errorf("line %d, message %q: %w", line, id, err))
		if o.StopOnPermanentFailure && !sbkit.IsTransient(err) && permanent == nil {
			permanent = err
		}
	}
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return permanent != nil
	}
	amqpSem := make(chan struct{}, amqpConcurrency)
	br := bufio.NewReaderSize(r, 1<<20)
	var reason StopReason
	var readErr error
	started := 0
	line := 0
	for {
		if ctx.Err() != nil {
			reason = StopCancelled
			break
		}
		if stopped() {
			reason = StopPermanentFailure
			break
		}
		if ro.MaxMessages > 0 && started >= ro.MaxMessages {
			reason = StopMaxMessages
			break
		}
		rec, n, err := readRecord(br)
		line += n
		if errors.Is(err, io.EOF) {
			reason = StopDrained
			break
		}
		if err != nil {
			reason, readErr = StopError, fmt.Errorf("deadletter: line %d: %w", line, err)
			break
		}
		msg, amsg, rm, err := rec.decode(!o.KeepDeadLetterProperties)
		if err != nil {
			reason, readErr = StopError, fmt.Errorf("deadletter: line %d: %w", line, err)
			break
		}
		mu.Lock()
		st.Seen++
		matched := o.Filter.Matches(rm)
		if !matched {
			st.Skipped++
		}
		mu.Unlock()
		if !matched {
			continue
		}
		started++
		switch {
		case o.DryRun:
			outcome(rec.MessageID, line, nil)
		case msg != nil:
			res, err := snd.SendAsync(work, msg)
			if err != nil {
				outcome(rec.MessageID, line, err)
				break
			}
			wg.Add(1)
			go func(id string, line int) {
				defer wg.Done()
				<-res.Done()
				outcome(id, line, res.Err())
			}(rec.MessageID, line)
		case amqpDst == nil:
			outcome(rec.MessageID, line, ErrUnsupportedBody)
		default:
			amqpSem <- struct{}{}
			wg.Add(1)
			go func(id string, line int) {
				defer wg.Done()
				defer func() { <-amqpSem }()
				outcome(id, line, amqpDst.SendAMQPAnnotatedMessage(work, amsg, nil))
			}(rec.MessageID, line)
		}
		if started%DefaultPageSize == 0 {
			prog.report(ctx, snapshot())
		}
	}
	if snd != nil {
		_ = snd.Flush(work)
		wg.Wait()
		_ = snd.Close(work)
	}
	wg.Wait()
	mu.Lock()
	st.Stopped = reason
	if permanent != nil {
		st.Stopped = StopPermanentFailure
	}
	mu.Unlock()
	out := snapshot()
	prog.report(ctx, out)
	switch {
	case readErr != nil:
		return out, readErr
	case permanent != nil:
		return out, fmt.Errorf("%w: %w", ErrPermanentFailure, permanent)
	case reason == StopCancelled:
		return out, ctx.Err()
	}
	return out, nil
}

// decode returns what Import sends for r (a Message, or an AMQP message for other body
// kinds) and the message the Filter sees.
func (r *Record) decode(clean bool) (*azservicebus.Message, *azservicebus.AMQPAnnotatedMessage, *azservicebus.ReceivedMessage, error) {
	props, err := r.properties()
	if err != nil {
		return nil, nil, nil, err
	}
	rm := &azservicebus.ReceivedMessage{
		MessageID: r.MessageID, ApplicationProperties: props, Body: r.Body, ContentType: r.ContentType,
		CorrelationID: r.CorrelationID, SessionID: r.SessionID, PartitionKey: r.PartitionKey, Subject: r.Subject,
		To: r.To, ReplyTo: r.ReplyTo, SequenceNumber: r.SequenceNumber, EnqueuedTime: r.EnqueuedTime,
		DeadLetterReason: r.DeadLetterReason, DeadLetterErrorDescription: r.DeadLetterErrorDescription, DeadLetterSource: r.DeadLetterSource,
	}
	var msg *azservicebus.Message
	var amsg *azservicebus.AMQPAnnotatedMessage
	if r.BodyKind == "" {
		msg, err = r.Message()
	} else {
		amsg, err = r.AMQPMessage()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if clean {
		if msg != nil && msg.ApplicationProperties != nil {
			delete(msg.ApplicationProperties, deadLetterReasonProperty)
			delete(msg.ApplicationProperties, deadLetterDescriptionProperty)
		}
		if amsg != nil && amsg.ApplicationProperties != nil {
			delete(amsg.ApplicationProperties, deadLetterReasonProperty)
			delete(amsg.ApplicationProperties, deadLetterDescriptionProperty)
		}
	}
	return msg, amsg, rm, nil
}
