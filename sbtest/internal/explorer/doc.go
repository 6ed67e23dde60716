// Package explorer serves the emulator's explorer: a web page (static/, embedded) that
// shows every queue, topic and subscription of a namespace with its message counts,
// an entity's properties and rules, and its messages by peek, and that sends, re-drives,
// purges and deletes messages; and the small JSON API the page calls, under
// /$explorer/api/. sbtest's Server serves a Handler on its plain-HTTP administration
// listener, beside the administration API (sbtest/seam_explorer.go).
//
// Every read and every action goes through a Model, which sbtest implements with its
// exported API only (peek, send, schedule, receive, settle, the inspection snapshots):
// the explorer does what an SDK client could do, so counts, locks and delivery counts
// stay what the model says. Peeking takes no lock and counts no delivery ("Message
// browsing (peeking)",
// https://learn.microsoft.com/azure/service-bus-messaging/message-browsing).
//
// Paths: GET / is the page (only without the api-version parameter, which the SDKs'
// administration clients always send), GET /$explorer/static/* its files, and
// /$explorer/api/* the JSON API (api.go; the actions in send.go, redrive.go, purge.go
// and delete.go). No entity can collide with them: Service Bus entity names start with
// a letter or a digit ("Service Bus quotas" and the administration API's name rules,
// sbtest/internal/admin/properties.go). Actions are POSTs guarded against cross-site
// requests (guard.go).
package explorer
