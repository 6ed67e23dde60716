package sbtest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
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
