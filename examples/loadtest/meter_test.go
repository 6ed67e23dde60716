package main

import (
	"context"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// gate is a BatchSender whose sends block until released.
type gate struct {
	sbkit.BatchSender
	entered chan struct{}
	release chan struct{}
}

func (g *gate) SendMessage(context.Context, *azservicebus.Message, *azservicebus.SendMessageOptions) error {
	g.entered <- struct{}{}
	<-g.release
	return nil
}

func TestMeterPeakInFlight(t *testing.T) {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	m := &meter{BatchSender: g}
	var wg sync.WaitGroup
	for _, size := range []int{100, 200, 300} {
		wg.Go(func() { _ = m.SendMessage(t.Context(), &azservicebus.Message{Body: make([]byte, size)}, nil) })
		<-g.entered
	}
	close(g.release)
	wg.Wait()
	if got := m.peak.Load(); got != 600 {
		t.Errorf("peak = %d, want 600", got)
	}
	if got := m.inFlight.Load(); got != 0 {
		t.Errorf("in flight after all returned = %d, want 0", got)
	}
	// Sequential sends never overlap: the peak stays at the largest one.
	m2 := &meter{BatchSender: &gate{entered: make(chan struct{}, 2), release: closed()}}
	for _, size := range []int{100, 200} {
		_ = m2.SendMessage(t.Context(), &azservicebus.Message{Body: make([]byte, size)}, nil)
	}
	if got := m2.peak.Load(); got != 200 {
		t.Errorf("sequential peak = %d, want 200", got)
	}
}

func closed() chan struct{} { c := make(chan struct{}); close(c); return c }
