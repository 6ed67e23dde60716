// Package admin serves the Service Bus administration API over a Model: the ATOM/XML
// REST API of the SDKs' administration clients (create, get, update, list and delete
// queues, topics, subscriptions and rules, and report their runtime properties), and
// GET /health as Microsoft's Service Bus emulator answers it. sbtest's Server serves
// a Handler for its Namespace on its TLS port and, optionally, in plain HTTP; the
// connections, their limits and the certificate are the Server's.
//
// The package knows the model only through the Model, Entity and Topic interfaces, in
// its own terms (Options, Counts, string statuses, the model's ErrNotFound and
// ErrExists): it cannot reach sbtest's internals, and sbtest's adapter
// (sbtest/seam_admin.go) uses only sbtest's exported API.
//
// What the API keeps beyond the model is bounded by the entities that exist: the
// description last PUT for each (its reported-only properties) and its creation and
// update times, forgotten when the entity is deleted (through the API or the model). It
// creates at most 10,000 queues and topics and 2,000 subscriptions per topic, the
// service's quotas, and refuses what the service refuses; properties.go lists which
// properties are modelled and which only reported back.
//
// Sources: the azservicebus v1.11.0 admin client (paths, documents, what it parses back),
// its live tests (TestAdminClient_*) for the service's answers, and the "Service Bus
// management REST API" and "Service Bus quotas" pages.
package admin
