module github.com/sbkit/sbkit/cmd/sbemulator/explorertest

go 1.26.0

require (
	github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus v1.11.0
	github.com/chromedp/chromedp v0.23.0
	github.com/sbkit/sbkit v0.1.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.23.0 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.12.0 // indirect
	github.com/Azure/go-amqp v1.7.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

// Builds in this repository use the sibling modules' directories. Go applies replace only
// in the main module, so a user's build uses the versions required above (RELEASING.md).
replace github.com/sbkit/sbkit => ../../..
