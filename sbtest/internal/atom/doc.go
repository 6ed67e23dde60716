// Package atom encodes and decodes the ATOM/XML documents of the Service Bus
// administration API (the "entity descriptions" the SDK's admin client sends and
// parses: QueueDescription, TopicDescription, SubscriptionDescription, RuleDescription,
// NamespaceInfo, feeds of them, and the Error body). The ISO 8601 durations they carry
// are internal/emulator/isoduration's.
//
// Sources: the azservicebus v1.11.0 admin client (admin/*.go and internal/atom/*.go in
// the SDK module) for the element names, value types and what the client requires in a
// response; "Service Bus management REST API" (Queues, Topics, Subscriptions, Rules
// "Create" pages) for the documents themselves.
//
// Decoding ignores XML namespaces on elements (the client's are not always where the
// service puts them) and unknown elements. Encoded documents put the description in the
// Service Bus namespace inside an Atom entry, as the service does.
package atom
