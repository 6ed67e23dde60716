package sbtest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"
	"github.com/sbkit/sbkit/sbtest"
)

// The SDK tunnels AMQP through a WebSocket (wss:// on the server's port), as it does
// behind proxies that allow only HTTPS, and a plain HTTP client completes the message
// over the runtime REST API.
func ExampleServer_WebSocketClientOptions() {
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{
		Queues:        map[string]*sbtest.EntityOptions{"orders": nil},
		AdminHTTPAddr: "127.0.0.1:0",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(context.Background())

	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), srv.WebSocketClientOptions())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	defer client.Close(ctx)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("order 1")}, nil); err != nil {
		log.Fatal(err)
	}

	// Peek-Lock Message, then Delete Message at the Location it answers with.
	resp, err := http.Post(srv.AdminHTTPURL()+"/orders/messages/head?timeout=5", "", nil)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	req, _ := http.NewRequest(http.MethodDelete, resp.Header.Get("Location"), strings.NewReader(""))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// 201 Created order 1
	// 200 OK
}

// Any SDK client reaches the emulator's WebSocket endpoint with NewWebSocketConn: here
// ws:// on cmd/sbemulator's plain-HTTP port (5300), for the connection string it prints.
// (Compiled, not run: it needs an emulator on that port.)
func Example_webSocketToEmulator() {
	conn := os.Getenv("SERVICEBUS_CONNECTION_STRING")
	dial := func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
		wc, _, err := websocket.Dial(ctx, "ws://127.0.0.1:5300/$servicebus/websocket", &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), wc, websocket.MessageBinary), nil
	}
	client, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{NewWebSocketConn: dial})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
}
