package sbtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// inProcess is an azcore transport that serves requests with a handler in the test's
// process, without a network.
type inProcess struct{ h http.Handler }

func (p inProcess) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// inProcessAdmin returns the SDK's admin client for ns, served in process.
func inProcessAdmin(t *testing.T, ns *Namespace) *admin.Client {
	t.Helper()
	cs := "Endpoint=sb://sbtest.invalid;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
	ac, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: inProcess{adminapi.New(adminModel{ns})}}})
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

// collected reports whether the objects of ptrs were garbage collected, after a few
// collections.
func collected[T any](ptrs []weak.Pointer[T]) int {
	for range 3 {
		runtime.GC()
	}
	n := 0
	for _, p := range ptrs {
		if p.Value() == nil {
			n++
		}
	}
	return n
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A deleted queue, topic or subscription is freed with its messages, whatever created it
// (the administration API, the model) and deleted it, with its status set, its
// administration metadata read, a rule added, or as an auto-forwarding target: a
// queue-per-test suite against a long-running emulator does not grow.
func TestDeletedEntitiesAreFreed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := make([]byte, 1<<20)
	const cycles = 30
	send := func(t *testing.T, ns *Namespace, to string) {
		t.Helper()
		s, err := ns.NewSender(to, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: body}, nil); err != nil {
			t.Fatal(err)
		}
		_ = s.Close(ctx)
	}
	type cycle func(t *testing.T, ns *Namespace, ac *admin.Client, i int) (entities []*Entity, topics []*Topic)
	for _, tc := range []struct {
		name string
		run  cycle
	}{
		{"queue, admin API", func(t *testing.T, ns *Namespace, ac *admin.Client, i int) ([]*Entity, []*Topic) {
			name := fmt.Sprint("q", i)
			if _, err := ac.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{Status: to.Ptr(admin.EntityStatusActive)}}); err != nil {
				t.Fatal(err)
			}
			send(t, ns, name)
			if _, err := ac.GetQueueRuntimeProperties(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			e, _ := ns.Entity(name)
			if _, err := ac.DeleteQueue(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			return []*Entity{e}, nil
		}},
		{"topic with subscription and rule, admin API", func(t *testing.T, ns *Namespace, ac *admin.Client, i int) ([]*Entity, []*Topic) {
			name := fmt.Sprint("t", i)
			if _, err := ac.CreateTopic(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := ac.CreateSubscription(ctx, name, "s", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := ac.CreateRule(ctx, name, "s", &admin.CreateRuleOptions{Name: to.Ptr("r"),
				Filter: &admin.SQLFilter{Expression: "1=1"}}); err != nil {
				t.Fatal(err)
			}
			send(t, ns, name)
			if _, err := ac.GetSubscription(ctx, name, "s", nil); err != nil {
				t.Fatal(err)
			}
			top, _ := ns.Topic(name)
			sub, _ := ns.Entity(name + "/Subscriptions/s")
			if _, err := ac.DeleteTopic(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			return []*Entity{sub}, []*Topic{top}
		}},
		{"subscription, admin API", func(t *testing.T, ns *Namespace, ac *admin.Client, i int) ([]*Entity, []*Topic) {
			if _, ok := ns.Topic("kept"); !ok {
				if _, err := ac.CreateTopic(ctx, "kept", nil); err != nil {
					t.Fatal(err)
				}
			}
			name := fmt.Sprint("s", i)
			if _, err := ac.CreateSubscription(ctx, "kept", name, &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{Status: to.Ptr(admin.EntityStatusActive)}}); err != nil {
				t.Fatal(err)
			}
			send(t, ns, "kept")
			sub, _ := ns.Entity("kept/Subscriptions/" + name)
			if _, err := ac.DeleteSubscription(ctx, "kept", name, nil); err != nil {
				t.Fatal(err)
			}
			return []*Entity{sub}, nil
		}},
		{"queue, model, read through the admin API", func(t *testing.T, ns *Namespace, ac *admin.Client, i int) ([]*Entity, []*Topic) {
			name := fmt.Sprint("m", i)
			e, err := ns.NewQueue(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.SetStatus(StatusActive); err != nil {
				t.Fatal(err)
			}
			send(t, ns, name)
			if _, err := ac.GetQueue(ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			if err := ns.DeleteQueue(name); err != nil {
				t.Fatal(err)
			}
			return []*Entity{e}, nil
		}},
		{"forwarding source and target", func(t *testing.T, ns *Namespace, ac *admin.Client, i int) ([]*Entity, []*Topic) {
			dst, src := fmt.Sprint("dst", i), fmt.Sprint("src", i)
			if _, err := ac.CreateQueue(ctx, dst, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := ac.CreateQueue(ctx, src, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{ForwardTo: to.Ptr(dst)}}); err != nil {
				t.Fatal(err)
			}
			send(t, ns, src)
			d, _ := ns.Entity(dst)
			if _, err := d.WaitUntil(ctx, func(c Counts) bool { return c.Active == 1 }); err != nil {
				t.Fatal(err)
			}
			s, _ := ns.Entity(src)
			if _, err := ac.DeleteQueue(ctx, dst, nil); err != nil {
				t.Fatal(err)
			}
			send(t, ns, src) // dead-lettered in src: its target is gone
			if _, err := ac.DeleteQueue(ctx, src, nil); err != nil {
				t.Fatal(err)
			}
			return []*Entity{d, s}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := NewNamespace(&NamespaceOptions{MaxMessageSize: 2 << 20})
			ac := inProcessAdmin(t, ns)
			tc.run(t, ns, ac, -1) // warm up
			before := heapInUse()
			var es []weak.Pointer[Entity]
			var ts []weak.Pointer[Topic]
			for i := range cycles {
				entities, topics := tc.run(t, ns, ac, i)
				for _, e := range entities {
					es = append(es, weak.Make(e))
				}
				for _, tp := range topics {
					ts = append(ts, weak.Make(tp))
				}
			}
			if n := collected(es); n != len(es) {
				t.Errorf("%d of %d deleted queues and subscriptions still reachable", len(es)-n, len(es))
			}
			if n := collected(ts); n != len(ts) {
				t.Errorf("%d of %d deleted topics still reachable", len(ts)-n, len(ts))
			}
			if grown := int64(heapInUse()) - int64(before); grown > 4<<20 {
				t.Errorf("the heap grew by %d KiB over %d cycles of a 1 MiB message", grown>>10, cycles)
			}
			runtime.KeepAlive(ns)
			runtime.KeepAlive(ac)
		})
	}
}

// Empty queues created and deleted through the administration API leave nothing either:
// the cost of a cycle does not add up.
func TestDeletedEmptyQueuesCostNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := NewNamespace(nil)
	ac := inProcessAdmin(t, ns)
	cycle := func(i int) {
		name := fmt.Sprint("q", i)
		if _, err := ac.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ac.DeleteQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	cycle(-1)
	before := heapInUse()
	const cycles = 2000
	for i := range cycles {
		cycle(i)
	}
	if grown := int64(heapInUse()) - int64(before); grown > 256<<10 {
		t.Errorf("the heap grew by %d KiB over %d cycles of an empty queue", grown>>10, cycles)
	}
	runtime.KeepAlive(ac)
}

// ActiveMessageCount counts deferred messages, as the service does: the message count
// details ("Get message counters") have no deferred counter, and TotalMessageCount is
// their sum. Counts keeps them apart: ActiveMessageCount is Active + Locked + Deferred.
func TestAdminActiveCountsDeferred(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := NewNamespace(nil)
	q, _ := ns.NewQueue("q", nil)
	s, _ := ns.NewSender("q", nil)
	for range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := ns.NewReceiverForQueue("q", nil)
	ms, err := r.ReceiveMessages(ctx, 2, nil)
	if err != nil || len(ms) != 2 {
		t.Fatal(len(ms), err)
	}
	if err := r.DeferMessage(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	if c := q.Counts(); c.Active != 1 || c.Locked != 1 || c.Deferred != 1 {
		t.Fatalf("counts %+v, want one active, one locked, one deferred", c)
	}
	rt, err := inProcessAdmin(t, ns).GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt.ActiveMessageCount != 3 || rt.TotalMessageCount != 3 {
		t.Errorf("ActiveMessageCount %d, TotalMessageCount %d; want 3 and 3 (available, locked and deferred)", rt.ActiveMessageCount, rt.TotalMessageCount)
	}
}
