/* hopqa trace viewer: Shared by the views: DOM helpers that put server text in the page as text only, number
 * and time formats, the API (the key, JSON calls, errors, server-sent events) and the detail
 * dialog (an LLM call, a passage).
 */

export const KEY_STORE = "hopqa.apiKey";
const SVG_NS = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------------------------------
// DOM helpers: text only
// ---------------------------------------------------------------------------------------
const BOOL_PROPS = new Set(["hidden", "disabled", "open", "checked", "selected", "required"]);

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  return add(el, children);
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  return add(el, children);
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "text") el.textContent = String(v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (BOOL_PROPS.has(k)) el[k] = true;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

export function show(el, on) { el.hidden = !on; }

export function fmtNum(n, digits = 3) {
  if (n === null || n === undefined || n === "") return "—";
  if (typeof n !== "number") return String(n);
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  return Number(n.toFixed(digits)).toString();
}

export function fmtSec(s) {
  if (typeof s !== "number") return "—";
  if (s < 0.01) return `${(s * 1000).toFixed(1)} ms`;
  if (s < 100) return `${s.toFixed(2)} s`;
  return `${Math.round(s)} s`;
}

export function short(text, n = 90) {
  const t = String(text ?? "").replace(/\s+/g, " ").trim();
  return t.length <= n ? t : t.slice(0, n - 1) + "…";
}

export function asText(v) {
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v, null, 1);
}

export function badge(text, cls = "") {
  return h("span", { class: `badge ${cls}`.trim(), text });
}

export function plural(n, one, many = one + "s") {
  return `${fmtNum(n)} ${n === 1 ? one : many}`;
}

// ---------------------------------------------------------------------------------------
// API: the key, JSON calls, errors, server-sent events
// ---------------------------------------------------------------------------------------
export function apiKey() {
  try { return sessionStorage.getItem(KEY_STORE) || ""; } catch (e) { return ""; }
}

class ApiError extends Error {
  constructor(status, detail) {
    let hint = "";
    if (status === 401 || status === 403) hint = " — set the API key (top right) and try again";
    super(status ? `HTTP ${status}: ${detail}${hint}` : detail);
    this.status = status;
    this.detail = detail;
  }
}

export function formatDetail(d) {
  if (d === null || d === undefined) return "";
  if (typeof d === "string") return d;
  if (Array.isArray(d)) {
    return d.map((x) => (x && x.msg ? `${(x.loc || []).join(".")}: ${x.msg}` : JSON.stringify(x))).join("\n");
  }
  if (typeof d === "object" && d.message) return String(d.message);
  return JSON.stringify(d);
}

async function errorOf(resp) {
  let detail = resp.statusText || "request failed";
  try {
    const text = await resp.text();
    try {
      const j = JSON.parse(text);
      detail = formatDetail(j.detail ?? j.error ?? j);
    } catch (e) {
      if (text) detail = text.slice(0, 2000);
    }
  } catch (e) { /* keep the status text */ }
  return new ApiError(resp.status, detail);
}

export async function api(path, opts = {}) {
  const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let resp;
  try {
    resp = await fetch(path, { method: opts.method || "GET", headers, body: opts.body, signal: opts.signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, `cannot reach the hopqa server (${e.message})`);
  }
  if (!resp.ok) throw await errorOf(resp);
  return opts.raw ? resp : resp.json();
}

/** Parse one server-sent event block ("event: x\ndata: ...") into {event, data}. */
function parseSseBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : null;
}

/** The events of a text/event-stream response body (fetch + ReadableStream: EventSource cannot POST). */
export async function* sseEvents(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";   // normalised to \n line ends
  let tail = "";  // a trailing \r that may start a \r\n of the next chunk
  const blocks = function* () {
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = parseSseBlock(buf.slice(0, i));
      buf = buf.slice(i + 2);
      if (ev) yield ev;
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    let text = tail + (done ? decoder.decode() : decoder.decode(value, { stream: true }));
    tail = "";
    if (!done && text.endsWith("\r")) { tail = "\r"; text = text.slice(0, -1); }
    buf += text.replace(/\r\n?/g, "\n");
    yield* blocks();
    if (done) break;
  }
  if (buf.trim()) {
    const ev = parseSseBlock(buf);
    if (ev) yield ev;
  }
}

// ---------------------------------------------------------------------------------------
// The detail dialog (an LLM call, a passage)
// ---------------------------------------------------------------------------------------
function openDetail(title, ...content) {
  const dlg = $("#detail");
  $("#detail-title").textContent = title;
  const body = $("#detail-body");
  body.replaceChildren();
  add(body, content);
  body.scrollTop = 0;
  if (typeof dlg.showModal === "function") {
    if (!dlg.open) dlg.showModal();
  } else {
    dlg.setAttribute("open", "");
  }
}

export function closeDetail() {
  const dlg = $("#detail");
  if (typeof dlg.close === "function") dlg.close(); else dlg.removeAttribute("open");
}

export function textBlock(text, cls = "") {
  return h("pre", { class: `text ${cls}`.trim(), tabindex: "0", text: text ?? "" });
}

function kvTable(rows, cls = "kv") {
  const body = h("tbody");
  for (const [k, v] of rows) {
    if (v === undefined) continue;
    body.appendChild(h("tr", null, h("th", { scope: "row", text: k }), h("td", null, v instanceof Node ? v : String(v ?? "—"))));
  }
  return h("table", { class: cls }, body);
}

function prefixUse(p) {
  return `${fmtNum(p.restored)} tokens restored, ${fmtNum(p.evicted)} evicted; ` +
    `${fmtNum(p.entries)} prefixes held, ${fmtNum(p.mb, 1)} MiB`;
}

export function showLlmCall(call, where) {
  const tokens = call.type === "loglikelihood"
    ? `${fmtNum(call.prompt_tokens)} prompt`
    : `${fmtNum(call.prompt_tokens)} prompt + ${fmtNum(call.completion_tokens)} completion`;
  const fresh = call.prompt_tokens_evaluated;
  const evaluated = fresh === undefined || fresh === call.prompt_tokens ? "" : ` (${fmtNum(fresh)} prompt tokens evaluated)`;
  const parts = [
    kvTable([
      ["step", where],
      ["type", call.type || "generate"],
      ["backend", call.backend],
      ["tokens", tokens + evaluated],
      ["cached", call.cached ? "yes (no tokens counted)" : "no"],
      ["seconds", fmtSec(call.seconds)],
      ...(call.prefix_cache ? [["prefix cache", prefixUse(call.prefix_cache)]] : []),
      ...(call.schema_ignored ? [["schema", "ignored by the backend"]] : []),
      ...(call.error ? [["error", call.error]] : []),
    ]),
  ];
  if (call.type === "loglikelihood") {
    parts.push(h("h3", { text: "Context" }), textBlock(call.context, "prompt"));
    parts.push(h("h3", { text: "Continuation" }), textBlock(call.continuation));
    parts.push(h("p", null, `Total log-likelihood: ${fmtNum(call.total, 4)}`));
  } else {
    parts.push(h("h3", { text: "Prompt" }), textBlock(call.prompt, "prompt"));
    const outs = call.outputs || [];
    outs.forEach((o, i) => {
      parts.push(h("h3", { text: outs.length > 1 ? `Raw output ${i + 1} of ${outs.length}` : "Raw output" }));
      parts.push(textBlock(o, "output"));
    });
    if (!outs.length && !call.error) parts.push(h("p", { class: "muted", text: "No output recorded." }));
  }
  if (call.params) {
    parts.push(h("details", { class: "params" }, h("summary", { text: "Parameters" }), textBlock(JSON.stringify(call.params, null, 2))));
  }
  openDetail(`LLM call: ${call.type || "generate"}`, parts);
}

export function showPassage(p) {
  const rows = [
    ["id", p.id],
    ["title", p.title || "—"],
    ["score", p.score === undefined || p.score === null ? "—" : fmtNum(p.score, 4)],
  ];
  if (p.supporting !== undefined && p.supporting !== null) rows.push(["gold support", p.supporting ? "yes" : "no"]);
  if (p.used) rows.push(["behind the answer", "yes"]);
  const parts = [kvTable(rows)];
  if (p.text) {
    parts.push(h("h3", { text: "Text" }), textBlock(p.text, "passage-text"));
  } else {
    parts.push(h("p", { class: "muted", text:
      "No text was recorded for this passage (a trace written before retrieval records carried passage text)." }));
  }
  if (p.seen && p.seen.length) {
    parts.push(h("h3", { text: "Retrieved by" }));
    parts.push(h("ul", { class: "plain" }, p.seen.map((s) =>
      h("li", null, `${s.kind} #${s.step}: `, h("q", { text: s.query || "" }), s.score !== undefined && s.score !== null ? ` (score ${fmtNum(s.score, 4)})` : ""))));
  }
  openDetail(`Passage: ${p.title || p.id}`, parts);
}
