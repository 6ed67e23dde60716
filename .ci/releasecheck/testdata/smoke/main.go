// Command smoke is the release check's user program. Beside imports.go, which imports
// every package of every released module, it sends a message through sbkit's sender and
// receives it through sbkit's processor: on sbtest's in-memory namespace, or, with
// -connection-string, through the real azservicebus client (an installed sbemulator).
// It prints "smoke: ok" and exits 0 when the message came back and was completed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

func main() {
	connStr := flag.String("connection-string", "", "send and receive through the SDK's client on this namespace (queue \"smoke\") instead of in memory")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := smoke(ctx, *connStr); err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		os.Exit(1)
	}
	fmt.Println("smoke: ok")
}

func smoke(ctx context.Context, connStr string) error {
	snd, src, closeAll, err := open(ctx, connStr)
	if err != nil {
		return err
	}
	defer closeAll()

	s, err := sender.New(snd, nil)
	if err != nil {
		return err
	}
	if err := s.Send(ctx, &azservicebus.Message{MessageID: new("smoke-1"), Body: []byte("hello")}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := s.Close(ctx); err != nil {
		return fmt.Errorf("sender close: %w", err)
	}

	got := make(chan *azservicebus.ReceivedMessage, 1)
	p, err := receiver.New(src, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		got <- m
		return nil
	}, nil)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	var m *azservicebus.ReceivedMessage
	select {
	case m = <-got:
	case err := <-runErr:
		return fmt.Errorf("processor stopped before the message came: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("no message received: %w", ctx.Err())
	}
	for p.Stats().Completed < 1 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(ctx); err != nil {
		return fmt.Errorf("processor close: %w", err)
	}
	if err := <-runErr; err != nil {
		return fmt.Errorf("processor run: %w", err)
	}
	if m.MessageID != "smoke-1" || string(m.Body) != "hello" {
		return fmt.Errorf("received %q %q, want \"smoke-1\" \"hello\"", m.MessageID, m.Body)
	}
	if st := p.Stats(); st.Completed != 1 {
		return fmt.Errorf("processor stats %+v, want one message completed", st)
	}
	return nil
}

// open returns a sender and a receiver for the queue "smoke": in a new sbtest namespace,
// or through the SDK's client on connStr.
func open(ctx context.Context, connStr string) (sbkit.MessageSender, sbkit.MessageReceiver, func(), error) {
	if connStr == "" {
		ns := sbtest.NewNamespace(nil)
		if _, err := ns.NewQueue("smoke", nil); err != nil {
			return nil, nil, nil, err
		}
		snd, err := ns.NewSender("smoke", nil)
		if err != nil {
			return nil, nil, nil, err
		}
		src, err := ns.NewReceiverForQueue("smoke", nil)
		if err != nil {
			return nil, nil, nil, err
		}
		return snd, src, func() {}, nil
	}
	client, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	snd, sndErr := client.NewSender("smoke", nil)
	src, srcErr := client.NewReceiverForQueue("smoke", nil)
	if err := errors.Join(sndErr, srcErr); err != nil {
		_ = client.Close(ctx)
		return nil, nil, nil, err
	}
	return snd, src, func() { _ = client.Close(context.Background()) }, nil
}
