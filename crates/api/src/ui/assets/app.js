// The proxypool dashboard. It keeps no data of its own: every number comes from the same
// documented JSON routes a script would call, authenticated by the session cookie. Data is
// written into the page with textContent only, never as HTML.
"use strict";

const POLL_MS = 1500;
const STATES = ["FETCHED", "AVAILABLE", "SUSPECT", "UNHEALTHY", "EXTRACTED", "EXPIRED"];
let csrf = null;
let tab = "overview";
let timer = null;
let busy = false;

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "data") Object.assign(node.dataset, value);
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const pill = (text, kind) => el("span", { class: "pill " + (kind || text) }, text);
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const pct = (f) => (f === null || f === undefined ? "–" : (f * 100).toFixed(1) + "%");
const ms = (n) => (n === null || n === undefined ? "–" : n + " ms");

function ago(at) {
  if (!at) return "never";
  const s = Math.max(0, Math.round((Date.now() - at) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

function left(msLeft) {
  if (msLeft <= 0) return "0 s";
  const s = Math.round(msLeft / 1000);
  return s < 120 ? s + " s" : Math.round(s / 60) + " min";
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

class SignedOut extends Error {}

async function api(path, options) {
  const init = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (init.method && init.method !== "GET") init.headers["X-CSRF-Token"] = csrf || "";
  const response = await fetch(path, init);
  if (response.status === 401) throw new SignedOut();
  if (!response.ok) {
    let message = response.status + "";
    try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ---- pages -------------------------------------------------------------------------

async function overview() {
  const o = await api("/v1/admin/overview");
  storeNotice(o.store);
  const by = o.proxies.by_status;
  const total = Object.values(by).reduce((a, b) => a + b, 0);
  $("ov-proxies").textContent = num(total);
  $("ov-proxies-sub").textContent = num(by.AVAILABLE || 0) + " available" + (o.proxies.truncated ? " (first page)" : "");
  $("ov-owned").textContent = num(o.proxies.owned);
  $("ov-extracted").textContent = num(o.extraction.extracted);
  $("ov-extracted-sub").textContent = num(o.extraction.extracted_this_minute) + " this minute";
  $("ov-requests").textContent = num(o.gateway.requests);
  $("ov-requests-sub").textContent = num(o.gateway.requests_this_minute) + " this minute";
  $("ov-success").textContent = pct(o.gateway.success_rate);
  $("ov-failures").textContent = num(o.gateway.failures) + " failed";
  const l = o.check_latency_ms;
  $("ov-latency").textContent = [l.p50, l.p90, l.p99].map((v) => (v === null ? "–" : v)).join(" / ") + " ms";
  $("ov-workers").textContent = num(o.workers.live);
  $("ov-workers-sub").textContent = o.workers.cordoned + " cordoned, " + o.workers.draining + " draining";
  chart(o.minutes);
  fill($("ov-upstreams").tBodies[0], o.upstreams.map((u) =>
    el("tr", { data: { upstream: u.id } },
      el("td", {}, u.id),
      el("td", {}, pill(u.health.state || u.health, u.health.state || u.health)),
      ...STATES.map((s) => el("td", { class: "num", data: { state: s } }, num(u.by_status[s] || 0))),
      el("td", { class: "num", data: { state: "LEASED" } }, num(u.owned)),
      el("td", {}, share(u.healthy_share)))));
}

// The pool store's state, shown only when it is not simply ok.
function storeNotice(store) {
  const notice = $("ov-store");
  const state = store ? store.state : "ok";
  notice.hidden = state === "ok";
  if (state === "recovering") {
    const why = store.loss === "forced" ? "An operator forced a recovery of the pool store"
      : "The pool store lost its memory (" + (store.loss || "loss") + ")";
    notice.textContent = why + "; it is recovering until " + new Date(store.until_ms).toLocaleTimeString() +
      ": proxies that may have been handed out before are withheld.";
  } else if (state === "lost") {
    notice.textContent = "The pool store lost its memory (" + store.reason + "): every call is refused until a new store is in place.";
  } else if (state === "unknown") {
    notice.textContent = "The pool store's identity is not established yet.";
  }
}

function share(f) {
  if (f === null || f === undefined) return "–";
  return el("span", {}, el("span", { class: "bar" }, el("span", { style: "width:" + Math.round(f * 100) + "%" })), pct(f));
}

function chart(minutes) {
  const svg = $("ov-chart");
  const ns = "http://www.w3.org/2000/svg";
  // Drawn at the element's own size, so text is never stretched.
  const W = Math.max(200, Math.round(svg.getBoundingClientRect().width)), H = 140, pad = 28;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const max = Math.max(1, ...minutes.map((m) => Math.max(m.requests, m.extracted)));
  const slot = (W - pad) / minutes.length;
  const nodes = [];
  const line = document.createElementNS(ns, "line");
  line.setAttribute("x1", pad); line.setAttribute("x2", W); line.setAttribute("y1", H - pad); line.setAttribute("y2", H - pad);
  line.setAttribute("class", "axis");
  nodes.push(line);
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", 0); label.setAttribute("y", 12); label.textContent = max;
  nodes.push(label);
  minutes.forEach((m, i) => {
    for (const [value, kind, offset] of [[m.requests, "req", 0], [m.extracted, "ext", 0.45]]) {
      const h = ((H - pad - 18) * value) / max;
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", pad + i * slot + slot * (0.1 + offset));
      rect.setAttribute("width", slot * 0.4);
      rect.setAttribute("y", H - pad - h);
      rect.setAttribute("height", h);
      rect.setAttribute("class", kind);
      nodes.push(rect);
    }
  });
  const first = document.createElementNS(ns, "text");
  first.setAttribute("x", pad); first.setAttribute("y", H - 8);
  first.textContent = "-" + (minutes.length - 1) + " min";
  const now = document.createElementNS(ns, "text");
  now.setAttribute("x", W - 24); now.setAttribute("y", H - 8); now.textContent = "now";
  nodes.push(first, now);
  svg.replaceChildren(...nodes);
}

async function upstreams() {
  const [list, o] = await Promise.all([api("/v1/upstreams"), api("/v1/admin/overview")]);
  const inv = Object.fromEntries(o.upstreams.map((u) => [u.id, u]));
  fill($("up-table").tBodies[0], list.upstreams.map((u) => {
    const i = inv[u.id] || {};
    const health = u.health.state || u.health;
    return el("tr", { data: { upstream: u.id } },
      el("td", {}, u.id),
      el("td", {}, u.provider),
      el("td", {}, pill(health, health)),
      el("td", {}, ago(u.last_fetch_at_ms)),
      el("td", {}, ago(u.last_success_at_ms)),
      el("td", { class: "num", data: { field: "last_fetched" } }, num(u.last_fetched)),
      el("td", { class: "num", data: { field: "accepted" } }, i.last_list ? num(i.last_list.accepted) : "–"),
      el("td", { class: "num" }, i.last_list ? num(i.last_list.dropped) : "–"),
      el("td", { class: "num" }, i.last_list ? num(i.last_list.refused) : "–"),
      el("td", { class: "num" }, num(u.consecutive_failures)),
      el("td", {}, u.last_error || "–"),
      el("td", { class: "num", data: { field: "managed" } }, num(i.managed)),
      el("td", {}, share(i.healthy_share)));
  }));
}

let proxyRows = [];

// What each reason of a failed health check means (GET /v1/admin/proxies, last_check_error),
// shown as the cell's tooltip.
const CHECK_ERRORS = {
  dns: "the proxy's host did not resolve, or resolved to an internal address its upstream may not dial",
  connect: "TCP to the proxy failed (refused, unreachable)",
  proxy_tls: "TLS to the https proxy failed: a certificate its trust does not vouch for, a wrong name, the handshake",
  auth: "the proxy refused the credentials (407, SOCKS5 authentication)",
  refused: "the proxy declined to reach the check target (CONNECT status, SOCKS5 reply)",
  protocol: "the proxy's answer was malformed or cut off",
  target_tls: "TLS to the https check target through the proxy failed",
  status: "the check target answered another status than expected",
  timeout: "no result within the checker's timeout",
  slow: "in time, but slower than the upstream's max_latency",
  other: "another failure; the controller's log has the cause",
};

function checkError(reason) {
  if (!reason) return "–";
  return el("span", { class: "check-error", title: CHECK_ERRORS[reason] || reason }, reason);
}

async function proxies() {
  const params = new URLSearchParams({ limit: "1000" });
  if ($("px-upstream").value) params.set("upstream", $("px-upstream").value);
  if ($("px-status").value) params.set("status", $("px-status").value);
  const page = await api("/v1/admin/proxies?" + params);
  proxyRows = page.proxies;
  const known = new Set([...$("px-upstream").options].map((o) => o.value));
  for (const p of proxyRows) {
    if (!known.has(p.upstream)) { $("px-upstream").append(el("option", {}, p.upstream)); known.add(p.upstream); }
  }
  renderProxies(page.next !== null);
}

function renderProxies(more) {
  const q = $("px-search").value.trim().toLowerCase();
  const shown = proxyRows.filter((p) => !q || [p.id, p.host + ":" + p.port, p.region || "", p.owner || "", p.extracted_by || "", p.upstream, p.last_check_error || ""]
    .some((f) => f.toLowerCase().includes(q)));
  $("px-count").textContent = shown.length + " of " + proxyRows.length + (more ? "+" : "") + " shown";
  fill($("px-table").tBodies[0], shown.map((p) =>
    el("tr", { data: { proxy: p.id, state: p.status, owner: p.owner || "", client: p.extracted_by || "", checkError: p.last_check_error || "" } },
      el("td", { class: "mono", title: p.id }, p.id.slice(0, 12)),
      el("td", {}, p.upstream),
      el("td", {}, p.region || "–"),
      el("td", {}, p.protocol),
      el("td", { class: "mono" }, p.host + ":" + p.port),
      el("td", {}, pill(p.status)),
      el("td", {}, p.owner ? p.owner + (p.draining ? " (draining)" : "") : p.extracted_by ? "extracted by " + p.extracted_by : "–"),
      el("td", { class: "num" }, left(p.time_left_ms)),
      el("td", { class: "num" }, ms(p.latency_ms)),
      el("td", {}, checkError(p.last_check_error)))));
}

async function gateways() {
  const [w, page] = await Promise.all([api("/v1/admin/workers"), api("/v1/admin/proxies?limit=1000")]);
  const leased = {};
  for (const p of page.proxies) if (p.owner) leased[p.owner] = (leased[p.owner] || 0) + 1;
  fill($("gw-table").tBodies[0], w.workers.map((g) => {
    const r = g.last_report;
    const act = (what) => el("button", { class: "small", data: { action: what, worker: g.worker }, onclick: () => setMode(g.worker, what) }, what);
    return el("tr", { data: { worker: g.worker, mode: g.mode } },
      el("td", {}, g.worker),
      el("td", {}, pill(g.mode)),
      el("td", {}, r ? ago(r.received_at) : "no report"),
      el("td", { class: "num", data: { field: "leased" } }, num(leased[g.worker] || 0)),
      el("td", { class: "num" }, r ? num(r.active) : "–"),
      el("td", { class: "num" }, r ? num(r.reserved) : "–"),
      el("td", {}, g.acked_snapshot ? "v" + g.acked_snapshot.version + " / epoch " + g.acked_snapshot.epoch : "none"),
      el("td", {}, act("cordon"), " ", act("drain"), " ", act("uncordon")));
  }));
}

async function setMode(worker, action) {
  $("gw-message").textContent = "";
  try {
    const r = await api("/v1/admin/workers/" + encodeURIComponent(worker) + "/" + action, { method: "POST" });
    $("gw-message").textContent = worker + " is now " + r.mode + ".";
    await gateways();
  } catch (error) {
    if (error instanceof SignedOut) return signedOut();
    $("gw-message").textContent = "Could not " + action + " " + worker + ": " + error.message;
  }
}

function quotaCell(q) {
  if (q.used === null) return el("td", { class: "num muted" }, "0 / " + num(q.limit));
  return el("td", { class: "num" }, num(q.used) + " / " + num(q.limit));
}

async function clients() {
  const c = await api("/v1/admin/clients");
  fill($("cl-table").tBodies[0], c.clients.map((k) => {
    const q = Object.fromEntries(k.quota.map((x) => [x.operation, x]));
    const lock = k.quota.find((x) => x.refused_until_ms);
    return el("tr", { data: { client: k.client } },
      el("td", {}, k.client, k.admin ? " " : null, k.admin ? pill("admin", "ok") : null),
      el("td", {}, k.project),
      el("td", { class: "num", data: { field: "requests" } }, num(k.usage.requests)),
      el("td", { class: "num" }, num(k.usage.failures)),
      el("td", { class: "num", data: { field: "extracted" } }, num(k.usage.extracted)),
      el("td", { class: "num" }, bytes(k.usage.bytes_up + k.usage.bytes_down)),
      quotaCell(q.extract), quotaCell(q.inspect), quotaCell(q.admin),
      el("td", {}, lock ? pill(lock.refused_by + " until " + new Date(lock.refused_until_ms).toLocaleTimeString(), "locked") : "none"));
  }));
}

const PAGES = { overview, upstreams, proxies, gateways, clients };

// ---- session and polling -----------------------------------------------------------

async function refresh() {
  if (busy || !csrf) return;
  busy = true;
  try {
    await PAGES[tab]();
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    if (error instanceof SignedOut) signedOut();
    else $("status").textContent = "error: " + error.message;
  } finally {
    busy = false;
  }
}

function show(name) {
  tab = name;
  for (const button of document.querySelectorAll("#tabs button")) button.classList.toggle("active", button.dataset.tab === name);
  for (const page of document.querySelectorAll(".page")) page.hidden = page.id !== "page-" + name;
  refresh();
}

function signedIn(session) {
  csrf = session.csrf_token;
  $("who").textContent = session.client;
  $("signin").hidden = true;
  $("app").hidden = false;
  document.body.dataset.signedIn = "true";
  clearInterval(timer);
  timer = setInterval(refresh, POLL_MS);
  show(tab);
}

function signedOut() {
  csrf = null;
  clearInterval(timer);
  // Nothing of the previous session stays on the page.
  for (const body of document.querySelectorAll("#app tbody")) body.replaceChildren();
  for (const value of document.querySelectorAll("#app .value")) value.textContent = "–";
  $("app").hidden = true;
  $("signin").hidden = false;
  document.body.dataset.signedIn = "false";
  $("token").focus();
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("signin-error").textContent = "";
  try {
    const response = await fetch("/ui/session", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: $("token").value }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error ? body.error.message : String(response.status));
    $("token").value = "";
    signedIn(body);
  } catch (error) {
    $("signin-error").textContent = "Sign-in refused: " + error.message;
  }
});

$("signout").addEventListener("click", async () => {
  try { await api("/ui/session", { method: "DELETE" }); } catch (_) { /* signed out either way */ }
  signedOut();
});

for (const button of document.querySelectorAll("#tabs button")) button.addEventListener("click", () => show(button.dataset.tab));
$("px-search").addEventListener("input", () => renderProxies(false));
$("px-upstream").addEventListener("change", refresh);
$("px-status").addEventListener("change", refresh);

(async () => {
  try {
    signedIn(await api("/ui/session"));
  } catch (_) {
    signedOut();
  }
})();
