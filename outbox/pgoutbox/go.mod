module github.com/sbkit/sbkit/outbox/pgoutbox

go 1.26.0

replace (
	github.com/sbkit/sbkit => ../..
	github.com/sbkit/sbkit/dedupe/pgdedupe => ../../dedupe/pgdedupe
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus v1.11.0
	github.com/Azure/go-amqp v1.7.0
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/sbkit/sbkit v0.1.0
	github.com/sbkit/sbkit/dedupe/pgdedupe v0.1.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.23.0 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.12.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
