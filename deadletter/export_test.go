package deadletter_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/deadletter"
	"github.com/sbkit/sbkit/sbtest"
)

// typedProperties has one application property of every type an export keeps.
func typedProperties() map[string]any {
	return map[string]any{
		"s": "text", "b": true, "i8": int8(-8), "i16": int16(-16), "i32": int32(-32), "i64": int64(math.MinInt64),
		"u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(math.MaxUint64),
		"f32": float32(1.5), "f64": 2.25, "nan": math.Inf(1),
		"t":   time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		"u":   amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		"bin": []byte{0, 1, 2}, "sym": amqp.Symbol("sym"), "nil": nil,
	}
}

func TestValueRoundTrip(t *testing.T) {
	for k, v := range typedProperties() {
		ev, err := deadletter.EncodeValue(v)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		line, _ := json.Marshal(ev)
		var back deadletter.Value
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		got, err := back.Decode()
		if err != nil {
			t.Fatalf("%s: %s: %v", k, line, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%s: %#v came back as %#v (%s)", k, v, got, line)
		}
	}
	nested := []any{int32(1), "x", map[string]any{"k": []any{true}}}
	ev, err := deadletter.EncodeValue(nested)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.Decode()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int32(1), "x", map[any]any{"k": []any{true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("nested %#v came back as %#v", want, got)
	}
	if _, err := deadletter.EncodeValue(struct{}{}); err == nil {
		t.Fatal("a struct was exported")
	}
	for _, bad := range []string{`{"type":"int8","value":300}`, `{"type":"uuid","value":"nope"}`, `{"type":"what","value":1}`, `{"type":"time","value":"yesterday"}`} {
		var v deadletter.Value
		if err := json.Unmarshal([]byte(bad), &v); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Decode(); !errors.Is(err, deadletter.ErrBadRecord) {
			t.Fatalf("%s decoded: %v", bad, err)
		}
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
		q, _ := ns.Entity("q")
		dq, _ := ns.Entity("dst")
		msgs := messages(40, nil)
		for _, m := range msgs {
			m.ApplicationProperties = typedProperties()
			m.ApplicationProperties["id"] = *m.MessageID
			m.TimeToLive = new(time.Hour)
			m.PartitionKey = new("pk")
			m.ReplyToSessionID = new("rs")
		}
		msgs[3].Body = []byte{0, 0xff, '\n', '"'}
		deadLetterAll(t, ns, "q", q, msgs, func(i int) string { return fmt.Sprint("r", i%2) })
		var buf bytes.Buffer
		st, err := deadletter.Export(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), &buf, nil)
		if err != nil || st.Moved != 40 {
			t.Fatalf("export: %+v %v", st, err)
		}
		if q.Counts().DeadLetter != 40 {
			t.Fatal("an export by peek changed the queue")
		}
		if n := strings.Count(buf.String(), "\n"); n != 40 {
			t.Fatalf("%d lines", n)
		}
		first, err := deadletter.ReadRecord(bufio.NewReader(strings.NewReader(buf.String())))
		if err != nil || first.DeadLetterReason == nil || *first.DeadLetterReason != "r0" || first.SequenceNumber == nil || first.EnqueuedTime == nil {
			t.Fatalf("first record %+v %v", first, err)
		}
		dst, _ := ns.NewSender("dst", nil)
		ist, err := deadletter.Import(t.Context(), strings.NewReader(buf.String()), dst, &deadletter.ImportOptions{Filter: &deadletter.Filter{Reasons: []string{"r1"}}})
		if err != nil || ist.Moved != 20 || ist.Skipped != 20 {
			t.Fatalf("import: %+v %v", ist, err)
		}
		reconciles(t, ist)
		got := drainQueue(t, ns, dq)
		if len(got) != 20 {
			t.Fatalf("%d messages imported", len(got))
		}
		for i, want := range msgs {
			if i%2 == 0 {
				continue
			}
			m := got[*want.MessageID][0]
			props := m.ApplicationProperties
			if _, ok := props["DeadLetterReason"]; ok {
				t.Fatal("an import kept DeadLetterReason")
			}
			delete(props, "DeadLetterErrorDescription")
			if !reflect.DeepEqual(props, want.ApplicationProperties) {
				t.Fatalf("message %d properties\n got %#v\nwant %#v", i, props, want.ApplicationProperties)
			}
			if !bytes.Equal(m.Body, want.Body) || *m.TimeToLive != time.Hour || *m.PartitionKey != "pk" || *m.ReplyToSessionID != "rs" ||
				*m.CorrelationID != *want.CorrelationID || *m.ContentType != "text/plain" {
				t.Fatalf("message %d differs: %+v", i, m)
			}
		}
		if !bytes.Equal(got["m0003"][0].Body, msgs[3].Body) {
			t.Fatal("binary body changed")
		}
	})
}

func TestImportBadLineStopsAndSaysWhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"dst": nil}})
		dq, _ := ns.Entity("dst")
		dst, _ := ns.NewSender("dst", nil)
		in := `{"messageId":"a","body":"YQ=="}` + "\n\n" + `{"messageId":"b","body":"Yg=="}` + "\n" + `{"messageId":"c","bodyy":"x"}` + "\n" + `{"messageId":"d"}` + "\n"
		st, err := deadletter.Import(t.Context(), strings.NewReader(in), dst, nil)
		if !errors.Is(err, deadletter.ErrBadRecord) || !strings.Contains(err.Error(), "line 4") {
			t.Fatalf("err %v", err)
		}
		if st.Moved != 2 || dq.Counts().Active != 2 {
			t.Fatalf("%+v, %+v", st, dq.Counts())
		}
	})
}

func TestExportAndCompleteMovesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(300, nil), func(i int) string { return fmt.Sprint("r", i%3) })
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		st, err := deadletter.ExportAndComplete(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), bw,
			&deadletter.ExportOptions{Filter: &deadletter.Filter{Reasons: []string{"r0"}}, IdleTimeout: time.Second, PageSize: 40})
		if err != nil || st.Moved != 100 || st.Skipped != 200 {
			t.Fatalf("%+v %v", st, err)
		}
		reconciles(t, st)
		if n := strings.Count(buf.String(), "\n"); n != 100 {
			t.Fatalf("%d lines written (the writer was flushed before each complete)", n)
		}
		if c := q.Counts(); c.DeadLetter != 200 || c.Locked != 0 {
			t.Fatalf("%+v", c)
		}
	})
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestExportAndCompleteWriteFailureLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(100, nil), func(int) string { return "x" })
		st, err := deadletter.ExportAndComplete(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), &failingWriter{n: 2},
			&deadletter.ExportOptions{IdleTimeout: time.Second, PageSize: 30})
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("err %v", err)
		}
		reconciles(t, st)
		if st.Moved != 60 || q.Counts().DeadLetter != 40 || q.Counts().Locked != 0 {
			t.Fatalf("%+v, %+v", st, q.Counts())
		}
	})
}

func TestPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(500, nil), func(i int) string { return fmt.Sprint("r", i%2) })
		// Dry run: nothing changes.
		st, err := deadletter.Purge(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), &deadletter.PurgeOptions{DryRun: true, Filter: &deadletter.Filter{Reasons: []string{"r1"}}})
		if err != nil || st.Moved != 250 || q.Counts().DeadLetter != 500 {
			t.Fatalf("dry run %+v %v %+v", st, err, q.Counts())
		}
		// With a filter, peek-lock: only the matches go.
		st, err = deadletter.Purge(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock), &deadletter.PurgeOptions{IdleTimeout: time.Second, PageSize: 100, Filter: &deadletter.Filter{Reasons: []string{"r1"}}})
		if err != nil || st.Moved != 250 || st.Skipped != 250 {
			t.Fatalf("%+v %v", st, err)
		}
		reconciles(t, st)
		for _, m := range q.DeadLetters() {
			if *m.DeadLetterReason != "r0" {
				t.Fatal("a message the filter did not match was purged")
			}
		}
		// Without a filter, receive-and-delete.
		st, err = deadletter.Purge(t.Context(), dlqReceiver(t, ns, q, azservicebus.ReceiveModeReceiveAndDelete), &deadletter.PurgeOptions{IdleTimeout: time.Second, ReceiveAndDelete: true})
		if err != nil || st.Moved != 250 || q.Counts().DeadLetter != 0 {
			t.Fatalf("%+v %v %+v", st, err, q.Counts())
		}
	})
}

func TestPurgeDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(10, nil), func(int) string { return "x" })
		r := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		ctx := t.Context()
		got, err := r.ReceiveMessages(ctx, 10, nil)
		if err != nil || len(got) != 10 {
			t.Fatal(len(got), err)
		}
		var seqs []int64
		for _, m := range got {
			if err := r.DeferMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, *m.SequenceNumber)
		}
		st, err := deadletter.Purge(ctx, r, &deadletter.PurgeOptions{SequenceNumbers: seqs[:6], Filter: &deadletter.Filter{MessageIDs: []string{"m0000", "m0001", "m0002", "m0003", "m0004"}}})
		if err != nil || st.Moved != 5 || st.Skipped != 1 {
			t.Fatalf("%+v %v", st, err)
		}
		reconciles(t, st)
		if n := len(q.DeadLetters()); n != 5 {
			t.Fatalf("%d dead letters left, want 5", n)
		}
	})
}

func TestSummarizeAndList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil}})
		q, _ := ns.Entity("q")
		deadLetterAll(t, ns, "q", q, messages(10, nil), func(i int) string { return fmt.Sprint("r", i%2) })
		time.Sleep(2 * time.Hour)
		deadLetterAll(t, ns, "q", q, messages(5, nil)[:0], func(int) string { return "" })
		more := messages(15, nil)[10:]
		deadLetterAll(t, ns, "q", q, more, func(int) string { return "late" })
		p := dlqReceiver(t, ns, q, azservicebus.ReceiveModePeekLock)
		s, st, err := deadletter.Summarize(t.Context(), p, &deadletter.PeekOptions{PageSize: 4})
		if err != nil || s.Count != 15 || st.Seen != 15 {
			t.Fatalf("%+v %+v %v", s, st, err)
		}
		if s.ByReason["r0"] != 5 || s.ByReason["r1"] != 5 || s.ByReason["late"] != 5 {
			t.Fatalf("by reason %v", s.ByReason)
		}
		if s.ByAge[0].Count != 5 || s.ByAge[1].Count != 10 || !s.Newest.After(s.Oldest) {
			t.Fatalf("by age %+v, oldest %v newest %v", s.ByAge, s.Oldest, s.Newest)
		}
		var ids []string
		lst, err := deadletter.List(t.Context(), p, &deadletter.PeekOptions{Filter: &deadletter.Filter{DescriptionContains: "description 1", EnqueuedBefore: time.Now().Add(-time.Hour)}}, func(m *azservicebus.ReceivedMessage) error {
			ids = append(ids, m.MessageID)
			return nil
		})
		if err != nil || !reflect.DeepEqual(ids, []string{"m0001"}) || lst.Skipped != 14 {
			t.Fatalf("%v %+v %v", ids, lst, err)
		}
		for _, m := range q.DeadLetters() {
			if m.DeliveryCount != 1 {
				t.Fatal("peeking raised DeliveryCount")
			}
		}
	})
}

// A cancelled import stops reading, waits for what it sent, and its Moved is what arrived.
func TestImportCancelReconciles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"dst": nil}})
		ns.SetLatency(sbtest.Latency{RoundTrip: 7 * time.Millisecond})
		dq, _ := ns.Entity("dst")
		dst, _ := ns.NewSender("dst", nil)
		var in strings.Builder
		for i := range 5000 {
			fmt.Fprintf(&in, "{\"messageId\":\"m%d\",\"body\":\"YQ==\"}\n", i)
		}
		ctx, cancel := context.WithCancel(t.Context())
		st, err := deadletter.Import(ctx, strings.NewReader(in.String()), dst, &deadletter.ImportOptions{
			Hooks: []deadletter.Hook{deadletter.ProgressHookFunc(func(_ context.Context, s deadletter.Stats) {
				if s.Seen >= 1000 {
					cancel()
				}
			})}})
		if !errors.Is(err, context.Canceled) || st.Stopped != deadletter.StopCancelled {
			t.Fatalf("%+v %v", st, err)
		}
		reconciles(t, st)
		if st.Seen >= 5000 || int64(dq.Counts().Active) != st.Moved {
			t.Fatalf("%+v, destination %+v", st, dq.Counts())
		}
	})
}
