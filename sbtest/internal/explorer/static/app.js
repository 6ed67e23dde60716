// The explorer's page: plain JavaScript, no dependencies, no build step. It reads the
// JSON API under /$explorer/api/ and renders with DOM nodes and textContent only, so
// that no entity name, property or body can inject markup.
"use strict";

const API = "/$explorer/api/";
const $ = (id) => document.getElementById(id);
const state = {
  view: "", path: "", nsSkip: 0, nsTop: 100, filter: "",
  queue: "main", msgFrom: 0, msgNext: null, pageStarts: [], selected: new Set(),
  entity: null, message: null,
};

// ---- authorization ------------------------------------------------------------------

// When the emulator requires shared access signatures (sbemulator -sas-key), the API
// answers 401 and the page asks for the connection string, or a token. From a connection
// string it signs namespace-wide tokens as the SDKs do: "SharedAccessSignature sr=<URL-
// encoded resource>&sig=<Base64 HMAC-SHA256 of the resource, a line feed and the
// expiry>&se=<expiry>&skn=<key name>" ("Service Bus access control with Shared Access
// Signatures"). WebCrypto signs only on a secure origin (https, localhost, 127.0.0.1);
// elsewhere paste a token. The secret stays in this tab's sessionStorage.
const AUTH_KEY = "sbkit-explorer-auth";
let cachedToken = { value: "", until: 0 };

async function authorization() {
  const secret = sessionStorage.getItem(AUTH_KEY);
  if (!secret) return null;
  if (secret.startsWith("SharedAccessSignature ")) return secret;
  const now = Math.floor(Date.now() / 1000);
  if (cachedToken.value && cachedToken.until > now + 60) return cachedToken.value;
  const parts = Object.fromEntries(secret.split(";").filter((p) => p.includes("=")).map((p) => {
    const i = p.indexOf("="); return [p.slice(0, i).trim().toLowerCase(), p.slice(i + 1).trim()];
  }));
  if (!parts.sharedaccesskeyname || !parts.sharedaccesskey) throw new Error("the connection string has no SharedAccessKeyName and SharedAccessKey");
  if (!window.crypto || !crypto.subtle) throw new Error("this page cannot sign tokens on a plain-HTTP origin other than localhost: paste a SharedAccessSignature token instead");
  const se = now + 3600;
  const sr = encodeURIComponent(location.origin.toLowerCase() + "/");
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(parts.sharedaccesskey), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(sr + "\n" + se)));
  const b64 = btoa(String.fromCharCode(...sig));
  cachedToken = { value: "SharedAccessSignature sr=" + sr + "&sig=" + encodeURIComponent(b64) + "&se=" + se + "&skn=" + parts.sharedaccesskeyname, until: se };
  return cachedToken.value;
}

function askForAuth(why) {
  $("auth").hidden = false;
  if (why) $("auth-text").textContent = "This emulator requires shared access signatures (" + why + "). Paste its connection string (with SharedAccessKeyName and SharedAccessKey) or a namespace-wide SharedAccessSignature token; it stays in this tab.";
}

// ---- API ----------------------------------------------------------------------------

async function call(url, init) {
  init.headers = init.headers || {};
  const token = await authorization();
  if (token) init.headers.Authorization = token;
  const r = await fetch(url, init);
  if (r.status === 401) {
    const text = await r.text();
    const detail = (text.match(/<Detail>([^<]*)<\/Detail>/) || [])[1] || "unauthorized";
    askForAuth(detail);
    throw new Error("unauthorized: " + detail);
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function get(name, params) {
  return call(API + name + "?" + new URLSearchParams(params), { cache: "no-store" });
}

// Actions are same-origin POSTs of JSON with the X-Sbkit-Explorer header, which a
// cross-site page cannot send without a CORS preflight the server never allows.
function post(name, body) {
  return call(API + name, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Sbkit-Explorer": "1" },
    body: JSON.stringify(body),
  });
}

// ---- helpers ------------------------------------------------------------------------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids) if (k !== undefined && k !== null) e.append(k instanceof Node ? k : String(k));
  return e;
}

function fmtInt(n) { return n === undefined || n === null ? "" : Number(n).toLocaleString("en-US"); }
function fmtBytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}
function fmtMs(ms) {
  if (!ms) return "none";
  if (ms >= 106751 * 86400000) return "max (none set)"; // TimeSpan.MaxValue or Go's longest duration
  const s = ms / 1000;
  if (s < 120) return s + " s";
  if (s < 7200) return (s / 60).toFixed(s % 60 ? 1 : 0) + " min";
  if (s < 172800) return (s / 3600).toFixed(s % 3600 ? 1 : 0) + " h";
  return (s / 86400).toFixed(s % 86400 ? 1 : 0) + " days";
}
function fmtTime(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$|Z$/, "") : ""; }
function hashFor(path, queue) {
  return "#/entity/" + encodeURIComponent(path) + (queue === "deadletter" ? "?queue=deadletter" : "");
}

let statusTimer = 0;
function say(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = "status" + (isError ? " error" : "");
  s.hidden = false;
  clearTimeout(statusTimer);
  statusTimer = setTimeout(() => { s.hidden = true; }, isError ? 9000 : 5000);
}

// confirmThen shows the confirmation bar; fn runs on Confirm.
function confirmThen(text, fn) {
  $("confirm-text").textContent = text;
  $("confirm").hidden = false;
  $("confirm-yes").onclick = async () => { $("confirm").hidden = true; await fn(); };
  $("confirm-no").onclick = () => { $("confirm").hidden = true; };
}

async function act(label, fn) {
  try { const msg = await fn(); if (msg) say(msg); } catch (e) { say(label + ": " + e.message, true); }
}

// ---- routing ------------------------------------------------------------------------

function route() {
  const h = location.hash || "#/";
  const m = h.match(/^#\/entity\/([^?]*)(\?queue=deadletter)?$/);
  $("confirm").hidden = true;
  if (m) {
    const path = decodeURIComponent(m[1]);
    const queue = m[2] ? "deadletter" : "main";
    const changed = state.view !== "entity" || state.path !== path || state.queue !== queue;
    state.view = "entity";
    if (changed) {
      state.path = path; state.queue = queue;
      state.msgFrom = 0; state.pageStarts = []; state.selected.clear(); state.message = null;
      $("message-card").hidden = true;
    }
    $("namespace-view").hidden = true;
    $("entity-view").hidden = false;
    crumbs(path);
    loadEntity(changed).catch((e) => say(e.message, true));
  } else {
    state.view = "namespace";
    $("entity-view").hidden = true;
    $("namespace-view").hidden = false;
    crumbs(null);
    loadNamespace().catch((e) => say(e.message, true));
  }
}

function crumbs(path) {
  const c = $("crumbs");
  c.replaceChildren();
  if (!path) return;
  c.append(el("a", { href: "#/" }, "namespace"), " / ");
  const [topic, sub] = path.split("/Subscriptions/");
  if (sub !== undefined) c.append(el("a", { href: hashFor(topic) }, topic), " / ", sub);
  else c.append(path);
}

// ---- namespace view -------------------------------------------------------------------

function countCell(n, dl) {
  return el("td", { class: "num" + (n ? (dl ? " dl" : "") : " zero") }, fmtInt(n));
}

async function loadNamespace() {
  const t0 = performance.now();
  const ns = await get("namespace", { filter: state.filter, skip: state.nsSkip, top: state.nsTop });
  if (state.view !== "namespace") return;
  const body = $("entities").tBodies[0];
  const rows = ns.rows.map((r) => {
    const c = r.counts;
    const tr = el("tr", { class: r.kind === "subscription" ? "sub" : r.kind, "data-path": r.path,
      onclick: () => { location.hash = hashFor(r.path); } },
      el("td", { class: "name", title: r.path }, r.kind === "subscription" ? r.name : r.path),
      el("td", {}, r.kind + (r.requiresSession ? " · sessions" : "")),
      el("td", {}, el("span", { class: "pill " + r.status }, r.status)));
    if (c) {
      tr.append(countCell(c.active), countCell(c.locked), countCell(c.deferred), countCell(c.scheduled),
        countCell(c.deadLetter, true), el("td", { class: "num" }, fmtBytes(c.size)));
    } else {
      tr.append(el("td", { colspan: 6, class: "muted" }, fmtInt(r.subscriptions) + " subscription" + (r.subscriptions === 1 ? "" : "s")));
    }
    return tr;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 9, class: "empty" }, state.filter ? "No entity matches the filter." : "The namespace is empty.")));
  body.replaceChildren(...rows);
  const last = Math.min(ns.skip + ns.rows.length, ns.matched);
  $("ns-summary").textContent = (ns.matched ? (ns.skip + 1) + "–" + last + " of " : "") + fmtInt(ns.matched) +
    (state.filter ? " matching (" + fmtInt(ns.total) + " entities)" : " entities");
  $("ns-prev").disabled = ns.skip === 0;
  $("ns-next").disabled = last >= ns.matched;
  $("clock").textContent = "updated " + new Date(ns.time).toLocaleTimeString() + " (" + Math.round(performance.now() - t0) + " ms)";
  document.body.dataset.nsLoaded = String(Math.round(performance.now()));
}

// ---- entity view ----------------------------------------------------------------------

function kv(tbody, rows) {
  tbody.replaceChildren(...rows.filter((r) => r).map(([k, v, type]) =>
    el("tr", {}, el("th", {}, k), el("td", {}, v === undefined || v === null ? "" : String(v), type ? el("span", { class: "type" }, type) : null))));
}

function renderCounts(c) {
  const box = $("entity-counts");
  if (!c) { box.replaceChildren(); return; }
  const item = (label, n, cls) => el("div", { class: "count " + (cls || ""), "data-count": label.toLowerCase() }, el("b", {}, fmtInt(n)), el("span", {}, label));
  box.replaceChildren(item("Active", c.active), item("Locked", c.locked), item("Deferred", c.deferred),
    item("Scheduled", c.scheduled), item("Dead-lettered", c.deadLetter, c.deadLetter ? "dl" : ""),
    el("div", { class: "count" }, el("b", {}, fmtBytes(c.size)), el("span", {}, "Size")));
}

function renderRule(r) {
  const div = el("div", { class: "rule" }, el("b", {}, r.name), " ", el("span", { class: "pill" }, r.filterType + " filter"));
  if (r.filterType === "sql") div.append(el("code", {}, r.sqlExpression));
  if (r.filterType === "correlation") {
    const parts = [];
    for (const [k, v] of Object.entries(r.correlation || {})) {
      if (v === null || v === undefined) continue;
      if (k === "ApplicationProperties") for (const [pk, pv] of Object.entries(v)) parts.push(pk + " = " + JSON.stringify(pv));
      else parts.push(k + " = " + JSON.stringify(v));
    }
    div.append(el("code", {}, parts.join("\n") || "(matches every message)"));
  }
  if (r.parameters && Object.keys(r.parameters).length) div.append(el("code", {}, "parameters " + JSON.stringify(r.parameters)));
  if (r.action) div.append(el("div", { class: "muted" }, "action"), el("code", {}, r.action));
  else if (r.actionType) div.append(el("div", { class: "muted" }, "action: " + r.actionType));
  return div;
}

async function loadEntity(first) {
  const e = await get("entity", { path: state.path });
  if (state.view !== "entity" || e.path !== state.path) return;
  state.entity = e;
  $("entity-title").textContent = e.kind === "subscription" ? e.topic + " / " + e.name : e.path;
  $("entity-kind").textContent = e.kind + (e.requiresSession ? " · sessions" : "");
  const st = $("entity-status");
  st.textContent = e.status; st.className = "pill " + e.status;
  renderCounts(e.counts);
  const p = e.properties;
  kv($("entity-props").tBodies[0], [
    e.kind !== "topic" && ["Lock duration", fmtMs(p.lockDurationMs)],
    e.kind !== "topic" && ["Max delivery count", p.maxDeliveryCount],
    ["Default message TTL", fmtMs(p.defaultTimeToLiveMs)],
    e.kind !== "topic" && ["Dead-letter on expiration", p.deadLetteringOnMessageExpiration ? "yes" : "no"],
    e.kind !== "subscription" && ["Duplicate detection", p.duplicateDetectionWindowMs ? "window " + fmtMs(p.duplicateDetectionWindowMs) : "off"],
    e.kind !== "topic" && ["Sessions", p.requiresSession ? "required" + (e.sessionIds ? " (" + e.sessionIds.length + " with messages)" : "") : "no"],
    e.kind !== "topic" && ["Forward to", p.forwardTo || "—"],
    e.kind !== "topic" && ["Forward dead letters to", p.forwardDeadLetteredMessagesTo || "—"],
    ["Last accessed", e.accessedAt ? fmtTime(e.accessedAt) + " UTC" : "never"],
  ]);
  $("rules-card").hidden = e.kind !== "subscription";
  if (e.kind === "subscription") $("rules").replaceChildren(...(e.rules || []).map(renderRule));
  $("subs-card").hidden = e.kind !== "topic";
  if (e.kind === "topic") {
    $("subs").replaceChildren(...(e.subscriptionNames || []).map((s) =>
      el("li", {}, el("a", { href: hashFor(e.path + "/Subscriptions/" + s) }, s))));
  }
  $("send-card").hidden = e.kind === "subscription";
  $("messages-card").hidden = e.kind === "topic";
  $("tab-main").classList.toggle("on", state.queue === "main");
  $("tab-dlq").classList.toggle("on", state.queue === "deadletter");
  document.querySelectorAll(".dlq-only").forEach((n) => { n.hidden = state.queue !== "deadletter"; });
  $("state").disabled = state.queue === "deadletter";
  $("purge").textContent = state.queue === "deadletter" ? "Purge dead letters" : "Purge";
  if (first && e.kind !== "topic") await loadMessages();
  document.body.dataset.entityLoaded = String(Math.round(performance.now()));
}

// ---- messages -------------------------------------------------------------------------

async function loadMessages() {
  const t0 = performance.now();
  const st = state.queue === "deadletter" ? "all" : $("state").value;
  const page = await get("messages", { path: state.path, queue: state.queue, state: st, from: state.msgFrom, top: 50 });
  state.msgNext = page.next === undefined ? null : page.next;
  const body = $("messages").tBodies[0];
  const dlq = state.queue === "deadletter";
  const rows = page.messages.map((m) => {
    const cb = el("input", { type: "checkbox", onclick: (ev) => ev.stopPropagation(),
      onchange: (ev) => { ev.target.checked ? state.selected.add(m.sequenceNumber) : state.selected.delete(m.sequenceNumber); } });
    cb.checked = state.selected.has(m.sequenceNumber);
    const tr = el("tr", { "data-seq": m.sequenceNumber, onclick: () => showMessage(m.sequenceNumber) },
      el("td", {}, cb), el("td", { class: "num" }, m.sequenceNumber), el("td", { class: "name", title: m.messageId }, m.messageId),
      el("td", { class: "state-" + m.state }, m.state), el("td", {}, fmtTime(m.enqueuedTime)),
      el("td", {}, m.subject || ""), el("td", {}, m.contentType || ""), el("td", { class: "num" }, fmtBytes(m.bodySize)),
      el("td", { class: "num" }, m.deliveryCount), el("td", {}, m.sessionId || ""));
    if (dlq) tr.append(el("td", { class: "dl", title: m.deadLetterErrorDescription || "" }, m.deadLetterReason || ""));
    return tr;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 11, class: "empty" }, state.msgFrom ? "No more messages." : (dlq ? "The dead-letter queue is empty." : "No messages."))));
  body.replaceChildren(...rows);
  $("select-all").checked = false;
  $("msg-next").disabled = state.msgNext === null;
  $("msg-summary").textContent = "page " + (state.pageStarts.length + 1) + " · " + page.messages.length + " shown" +
    (page.scanned > page.messages.length ? " (" + fmtInt(page.scanned) + " peeked)" : "") + " · " + Math.round(performance.now() - t0) + " ms";
  document.body.dataset.messagesLoaded = String(Math.round(performance.now()));
}

function decodeBody(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.slice(i, i + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const asc = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(i.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + "  " + asc);
  }
  return lines.join("\n");
}

// renderBody shows the body as JSON, text or hex: by the content type (RFC 2045 type,
// parameters ignored) unless the mode says otherwise; text that is not UTF-8 falls back
// to hex.
function renderBody(m) {
  const bytes = decodeBody(m.body);
  let mode = $("body-mode").value;
  const ct = (m.contentType || "").split(";")[0].trim().toLowerCase();
  let text = null;
  try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch (e) { text = null; }
  if (mode === "auto") {
    if (ct.endsWith("json") || ct.endsWith("+json")) mode = "json";
    else if (text !== null && (ct.startsWith("text/") || ct.endsWith("xml") || ct === "" )) mode = "text";
    else mode = text !== null && ct === "" ? "text" : "hex";
  }
  let out = "";
  if (mode === "json" && text !== null) {
    try { out = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { out = text; mode = "text (not valid JSON)"; }
  } else if (mode !== "hex" && text !== null) {
    out = text;
  } else {
    out = hexDump(bytes); mode = "hex";
  }
  $("message-body").textContent = out;
  $("body-info").textContent = "· " + mode + " · " + fmtBytes(m.bodySize) + (m.bodyTruncated ? " (truncated)" : "");
}

async function showMessage(seq) {
  const page = await get("messages", { path: state.path, queue: state.queue, from: seq, top: 1, body: "full" });
  const m = page.messages[0];
  if (!m || m.sequenceNumber !== seq) { say("Message " + seq + " is gone.", true); await loadMessages(); return; }
  state.message = m;
  document.querySelectorAll("#messages tr.selected").forEach((r) => r.classList.remove("selected"));
  const row = document.querySelector('#messages tr[data-seq="' + seq + '"]');
  if (row) row.classList.add("selected");
  $("message-title").textContent = "Message " + seq;
  kv($("message-sys").tBodies[0], [
    ["SequenceNumber", m.sequenceNumber], ["MessageId", m.messageId], ["State", m.state],
    ["EnqueuedTime", fmtTime(m.enqueuedTime)], m.scheduledEnqueueTime && ["ScheduledEnqueueTime", fmtTime(m.scheduledEnqueueTime)],
    ["ExpiresAt", fmtTime(m.expiresAt)], ["TimeToLive", m.timeToLiveMs !== undefined ? fmtMs(m.timeToLiveMs) : ""],
    ["DeliveryCount", m.deliveryCount], m.lockedUntil && ["LockedUntil", fmtTime(m.lockedUntil)],
    ["ContentType", m.contentType], ["CorrelationId", m.correlationId], ["Subject", m.subject], ["To", m.to],
    ["ReplyTo", m.replyTo], ["ReplyToSessionId", m.replyToSessionId], ["SessionId", m.sessionId], ["PartitionKey", m.partitionKey],
    m.enqueuedSequenceNumber !== undefined && ["EnqueuedSequenceNumber", m.enqueuedSequenceNumber],
    m.deadLetterReason !== undefined && ["DeadLetterReason", m.deadLetterReason],
    m.deadLetterErrorDescription !== undefined && ["DeadLetterErrorDescription", m.deadLetterErrorDescription],
    m.deadLetterSource !== undefined && ["DeadLetterSource", m.deadLetterSource],
  ]);
  const app = m.properties.map((p) => [p.name, p.value, p.type]);
  kv($("message-app").tBodies[0], app.length ? app : [["(none)", ""]]);
  renderBody(m);
  $("message-card").hidden = false;
}

// ---- actions --------------------------------------------------------------------------

function addPropRow(name, type, value) {
  const row = el("div", { class: "prop" },
    el("input", { placeholder: "name", value: name || "", class: "prop-name" }),
    (() => { const s = el("select", { class: "prop-type" }, ...["string", "long", "int", "double", "boolean", "datetime"].map((t) => el("option", { value: t }, t))); s.value = type || "string"; return s; })(),
    el("input", { placeholder: "value", value: value || "", class: "prop-value" }),
    el("button", { type: "button", onclick: () => row.remove(), title: "Remove" }, "×"));
  $("send-props").append(row);
}

async function send(ev) {
  ev.preventDefault();
  const at = $("send-at").value;
  const req = {
    path: state.path, body: $("send-body").value, contentType: $("send-ct").value,
    messageId: $("send-id").value, sessionId: $("send-session").value, subject: $("send-subject").value,
    correlationId: $("send-corr").value, count: Number($("send-count").value || 1),
    timeToLiveMs: Number($("send-ttl").value || 0) * 1000,
    scheduledEnqueueTime: at ? new Date(at + "Z").toISOString() : "",
    properties: Array.from(document.querySelectorAll("#send-props .prop")).map((r) => ({
      name: r.querySelector(".prop-name").value, type: r.querySelector(".prop-type").value, value: r.querySelector(".prop-value").value,
    })).filter((p) => p.name),
  };
  await act("Send", async () => {
    const out = await post("send", req);
    await refreshEntity();
    return (at ? "Scheduled " : "Sent ") + out.sent + " message" + (out.sent === 1 ? "" : "s") + " to " + state.path +
      (out.sequenceNumbers ? " (sequence numbers " + out.sequenceNumbers.join(", ") + ")" : "") + ".";
  });
}

async function refreshEntity() {
  await loadEntity(false);
  if (state.entity && state.entity.kind !== "topic") await loadMessages();
}

function redrive(all) {
  const seqs = Array.from(state.selected);
  if (!all && !seqs.length) { say("Select dead letters first.", true); return; }
  const target = state.entity.kind === "subscription" ? "topic " + state.entity.topic + " (every matching subscription gets a copy)" : "queue " + state.path;
  confirmThen((all ? "Re-drive every dead letter" : "Re-drive " + seqs.length + " dead letter" + (seqs.length === 1 ? "" : "s")) + " to " + target +
    "? Each is copied, and removed from the dead-letter queue only after the copy is stored." +
    (all ? "" : " Dead letters before the selected ones are received and abandoned to reach them (their delivery count goes up)."),
    () => act("Re-drive", async () => {
      const out = await post("redrive", all ? { path: state.path, all: true } : { path: state.path, sequenceNumbers: seqs });
      state.selected.clear();
      await refreshEntity();
      let msg = "Re-drove " + out.redriven + " to " + out.target + ".";
      if (out.failed.length) msg += "\n" + out.failed.length + " failed: " + out.failed.map((f) => f.sequenceNumber + ": " + f.error).join("; ");
      if (out.notFound.length) msg += "\nNot available (locked or gone): " + out.notFound.join(", ");
      if (out.passedOver) msg += "\n" + out.passedOver + " other dead letters were received and abandoned on the way.";
      if (out.failed.length) throw new Error(msg);
      return msg;
    }));
}

function purge() {
  const dlq = state.queue === "deadletter";
  confirmThen("Purge " + (dlq ? "the dead-letter queue of " : "") + state.path + "? Every message a client can remove is deleted" +
    (dlq ? "." : " (available, deferred, and a queue's scheduled ones); locked ones stay with their receivers."),
    () => act("Purge", async () => {
      const out = await post("purge", { path: state.path, queue: state.queue });
      state.selected.clear(); state.msgFrom = 0; state.pageStarts = [];
      $("message-card").hidden = true;
      await refreshEntity();
      let msg = "Purged " + out.removed + " message" + (out.removed === 1 ? "" : "s") + (out.cancelled ? " and cancelled " + out.cancelled + " scheduled" : "") + ".";
      if (out.notes.length) msg += "\n" + out.notes.join("\n");
      if (out.stopped) msg += "\nStopped: " + out.stopped + " (run it again).";
      return msg;
    }));
}

function deleteMessage() {
  const m = state.message;
  if (!m) return;
  const how = m.state === "scheduled" ? "It is cancelled." : m.state === "deferred" ? "It is received by its sequence number and completed." :
    "It is received and completed; messages before it are received and abandoned on the way (their delivery count goes up).";
  confirmThen("Delete message " + m.sequenceNumber + "? " + how, () => act("Delete", async () => {
    const out = await post("delete", { path: state.path, queue: state.queue, sequenceNumber: m.sequenceNumber });
    $("message-card").hidden = true; state.message = null;
    await refreshEntity();
    return "Deleted message " + m.sequenceNumber + " (" + out.how + (out.passedOver ? "; " + out.passedOver + " passed over" : "") + ").";
  }));
}

// ---- wiring ---------------------------------------------------------------------------

function init() {
  window.addEventListener("hashchange", route);
  $("auth-use").onclick = () => {
    const v = $("auth-input").value.trim();
    if (!v) return;
    sessionStorage.setItem(AUTH_KEY, v);
    cachedToken = { value: "", until: 0 };
    $("auth-input").value = "";
    $("auth").hidden = true;
    route();
  };
  let filterTimer = 0;
  $("filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => { state.filter = $("filter").value.trim(); state.nsSkip = 0; loadNamespace().catch((e) => say(e.message, true)); }, 150);
  });
  $("ns-prev").onclick = () => { state.nsSkip = Math.max(0, state.nsSkip - state.nsTop); loadNamespace(); };
  $("ns-next").onclick = () => { state.nsSkip += state.nsTop; loadNamespace(); };
  $("tab-main").onclick = () => { location.hash = hashFor(state.path); };
  $("tab-dlq").onclick = () => { location.hash = hashFor(state.path, "deadletter"); };
  $("state").onchange = () => { state.msgFrom = 0; state.pageStarts = []; loadMessages().catch((e) => say(e.message, true)); };
  $("msg-refresh").onclick = () => { state.msgFrom = 0; state.pageStarts = []; loadMessages().catch((e) => say(e.message, true)); };
  $("msg-next").onclick = () => {
    if (state.msgNext === null) return;
    state.pageStarts.push(state.msgFrom); state.msgFrom = state.msgNext;
    loadMessages().catch((e) => say(e.message, true));
  };
  $("select-all").onchange = (ev) => {
    document.querySelectorAll("#messages tbody input[type=checkbox]").forEach((cb) => { cb.checked = ev.target.checked; cb.dispatchEvent(new Event("change")); });
  };
  $("redrive-selected").onclick = () => redrive(false);
  $("redrive-all").onclick = () => redrive(true);
  $("purge").onclick = purge;
  $("message-delete").onclick = deleteMessage;
  $("message-close").onclick = () => { $("message-card").hidden = true; state.message = null; };
  $("body-mode").onchange = () => { if (state.message) renderBody(state.message); };
  $("send-form").addEventListener("submit", send);
  $("send-add-prop").onclick = () => addPropRow();
  // Live refresh: the namespace page, or the entity's counts, every two seconds.
  setInterval(() => {
    if (!$("live").checked || document.hidden) return;
    const p = state.view === "namespace" ? loadNamespace() : loadEntity(false);
    p.catch(() => {});
  }, 2000);
  route();
}

init();
