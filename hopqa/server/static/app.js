/* hopqa trace viewer: the page served at / by `hopqa serve`.
 *
 * Two views: Ask (POST /v1/answer, read the server-sent events, grow the trace live) and Runs
 * (GET /v1/runs, one run's questions, two methods side by side). Plain JS, no framework, no
 * network access beyond this server.
 *
 * Safety: everything that comes from the server (model output, passages, questions) is put in
 * the page as text: elements are built with createElement / textContent, never innerHTML.
 */
"use strict";

(() => {
  const KEY_STORE = "hopqa.apiKey";
  const SVG_NS = "http://www.w3.org/2000/svg";

  // ---------------------------------------------------------------------------------------
  // DOM helpers: text only
  // ---------------------------------------------------------------------------------------
  const BOOL_PROPS = new Set(["hidden", "disabled", "open", "checked", "selected", "required"]);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return add(el, children);
  }

  function svg(tag, attrs, ...children) {
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

  const $ = (sel, root = document) => root.querySelector(sel);

  function show(el, on) { el.hidden = !on; }

  function fmtNum(n, digits = 3) {
    if (n === null || n === undefined || n === "") return "—";
    if (typeof n !== "number") return String(n);
    if (Number.isInteger(n)) return n.toLocaleString("en-US");
    return Number(n.toFixed(digits)).toString();
  }

  function fmtSec(s) {
    if (typeof s !== "number") return "—";
    if (s < 0.01) return `${(s * 1000).toFixed(1)} ms`;
    if (s < 100) return `${s.toFixed(2)} s`;
    return `${Math.round(s)} s`;
  }

  function short(text, n = 90) {
    const t = String(text ?? "").replace(/\s+/g, " ").trim();
    return t.length <= n ? t : t.slice(0, n - 1) + "…";
  }

  function asText(v) {
    if (v === null || v === undefined) return "";
    return typeof v === "string" ? v : JSON.stringify(v, null, 1);
  }

  function badge(text, cls = "") {
    return h("span", { class: `badge ${cls}`.trim(), text });
  }

  function plural(n, one, many = one + "s") {
    return `${fmtNum(n)} ${n === 1 ? one : many}`;
  }

  // ---------------------------------------------------------------------------------------
  // API: the key, JSON calls, errors, server-sent events
  // ---------------------------------------------------------------------------------------
  function apiKey() {
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

  function formatDetail(d) {
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

  async function api(path, opts = {}) {
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
  async function* sseEvents(resp) {
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

  function closeDetail() {
    const dlg = $("#detail");
    if (typeof dlg.close === "function") dlg.close(); else dlg.removeAttribute("open");
  }

  function textBlock(text, cls = "") {
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

  function showLlmCall(call, where) {
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

  function showPassage(p) {
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

  // ---------------------------------------------------------------------------------------
  // The trace model: steps by id, built from live events or a finished trace
  // ---------------------------------------------------------------------------------------
  const STEP_FIELDS = ["kind", "inputs", "outputs", "llm_calls", "retrievals", "events", "error", "seconds", "hop"];

  class TraceModel {
    constructor() {
      this.steps = new Map();
      this.roots = [];
      this.orphans = new Map(); // parent id -> steps waiting for it
      this.passages = new Map();
      this.version = 0;
    }

    static fromTrace(trace) {
      const m = new TraceModel();
      let next = -1;
      const visit = (d, parentId) => {
        const id = d.id !== undefined && d.id !== null && !m.steps.has(d.id) ? d.id : next--;
        const s = m.get(id);
        for (const f of STEP_FIELDS) if (d[f] !== undefined) s[f] = d[f];
        s.running = false;
        s.closes = 1;
        m.attach(s, parentId);
        m.indexPassages(s);
        for (const c of d.children || []) visit(c, id);
      };
      if (trace) visit(trace, null);
      return m;
    }

    get(id) {
      let s = this.steps.get(id);
      if (!s) {
        s = { id, kind: "?", inputs: {}, outputs: {}, llm_calls: [], retrievals: [], events: [], error: null,
              seconds: 0, hop: null, children: [], parentId: null, attached: false, running: true, closes: 0 };
        this.steps.set(id, s);
      }
      return s;
    }

    attach(s, parentId) {
      if (s.attached) return;
      s.attached = true;
      s.parentId = parentId ?? null;
      if (parentId === null || parentId === undefined) {
        this.roots.push(s);
      } else if (this.steps.has(parentId) && this.steps.get(parentId).attached) {
        this.steps.get(parentId).children.push(s);
      } else {
        if (!this.orphans.has(parentId)) this.orphans.set(parentId, []);
        this.orphans.get(parentId).push(s);
      }
      const waiting = this.orphans.get(s.id);
      if (waiting) {
        this.orphans.delete(s.id);
        s.children.push(...waiting);
      }
    }

    /** One live record: {"event": "open"|"close", "id", "parent", ...}. */
    event(rec) {
      if (!rec || rec.id === undefined) return;
      const s = this.get(rec.id);
      if (rec.event === "open") {
        if (rec.kind) s.kind = rec.kind;
        if (rec.inputs) s.inputs = rec.inputs;
        s.running = s.closes === 0;
      } else {
        for (const f of STEP_FIELDS) if (rec[f] !== undefined) s[f] = rec[f];
        s.running = false;
        s.closes += 1;
        this.indexPassages(s);
      }
      this.attach(s, rec.parent);
      this.version += 1;
    }

    get root() {
      return this.roots.find((s) => s.kind === "question") || this.roots[0] || null;
    }

    indexPassages(s) {
      for (const r of s.retrievals || []) {
        for (const p of r.passages || []) {
          const e = this.passage(p.id, p.title);
          if (!e.seen.some((x) => x.step === s.id && x.query === r.query)) {
            e.seen.push({ step: s.id, kind: s.kind, query: r.query, score: p.score });
          }
          if (e.score === undefined || e.score === null) e.score = p.score;
          if (p.text && !e.text) e.text = p.text;
        }
      }
    }

    passage(id, title) {
      const key = String(id);
      let e = this.passages.get(key);
      if (!e) {
        e = { id: key, title: title || "", score: undefined, text: "", seen: [], used: false };
        this.passages.set(key, e);
      }
      if (title && !e.title) e.title = title;
      return e;
    }

    /** Passages of the answer (with text, when the server sends it) and of a run record. */
    addPassages(list, used) {
      for (const p of list || []) {
        if (!p || p.id === undefined) continue;
        const e = this.passage(p.id, p.title);
        if (p.text) e.text = p.text;
        if (p.score !== undefined && p.score !== null && (e.score === undefined || e.score === null)) e.score = p.score;
        if (p.is_supporting !== undefined) e.supporting = p.is_supporting;
        if (used) e.used = true;
      }
    }

    walk(fn) {
      const visit = (s, depth) => { fn(s, depth); for (const c of s.children) visit(c, depth + 1); };
      for (const r of this.roots) visit(r, 0);
    }

    all() { const out = []; this.walk((s) => out.push(s)); return out; }

    ofKind(kind) { return this.all().filter((s) => s.kind === kind); }

    /** The reasoning as hops, as hopqa.trace.Trace.hops computes them. */
    hops() {
      const out = [];
      const collect = (t, seen) => {
        for (const r of t.retrievals || []) {
          for (const p of r.passages || []) if (!seen.has(String(p.id))) seen.set(String(p.id), p);
        }
        for (const c of t.children) if (!c.hop) collect(c, seen);
      };
      const visit = (s, depth) => {
        if (s.hop) {
          let passages = s.hop.passages;
          if (!passages) { const seen = new Map(); collect(s, seen); passages = [...seen.values()]; }
          out.push({ step: s.id, question: s.hop.question || "", answer: s.hop.answer ?? "", label: s.hop.label || "",
                     depth, passages, running: s.running });
          depth += 1;
        }
        for (const c of s.children) visit(c, depth);
      };
      for (const r of this.roots) visit(r, 0);
      return out;
    }
  }

  /** Cost of a list of steps' own records. */
  function ownCost(s) {
    let prompt = 0, evaluated = 0, completion = 0, cached = 0;
    for (const c of s.llm_calls || []) {
      if (c.cached) cached += 1;
      else {
        prompt += c.prompt_tokens || 0; completion += c.completion_tokens || 0;
        evaluated += c.prompt_tokens_evaluated ?? (c.prompt_tokens || 0);
      }
    }
    return { llm: (s.llm_calls || []).length, cached, prompt, evaluated, completion, retrievals: (s.retrievals || []).length };
  }

  function subtreeCost(s) {
    const total = { llm: 0, cached: 0, prompt: 0, evaluated: 0, completion: 0, retrievals: 0, steps: 0 };
    const visit = (t) => {
      const c = ownCost(t);
      for (const k of Object.keys(c)) total[k] += c[k];
      total.steps += 1;
      t.children.forEach(visit);
    };
    visit(s);
    return total;
  }

  function costText(c, seconds) {
    const parts = [];
    if (seconds !== undefined) parts.push(fmtSec(seconds));
    if (c.llm) parts.push(`${plural(c.llm, "LLM call")}${c.cached ? ` (${c.cached} cached)` : ""}, ${fmtNum(c.prompt)}+${fmtNum(c.completion)} tok`);
    if (c.retrievals) parts.push(plural(c.retrievals, "retrieval"));
    return parts.join(" · ");
  }

  // ---------------------------------------------------------------------------------------
  // The trace view: answer, cost, method-specific reasoning, step tree, passages
  // ---------------------------------------------------------------------------------------
  let viewCounter = 0;
  const KEY_INPUTS = ["question", "query", "title", "sub_question", "step", "depth", "level", "t", "iteration", "turn", "strategy", "reader", "fusion"];

  class TraceView {
    constructor(container, opts = {}) {
      this.el = container;
      this.opts = opts;
      this.prefix = `tv${++viewCounter}`;
      this.model = new TraceModel();
      this.answer = null;
      this.live = !!opts.live;
      this.done = !opts.live;
      this.started = performance.now();
      this.openState = new Map();
      this.timer = null;
      this.status = "";
      this.el.replaceChildren();
      this.el.classList.add("tv");
      this.render();
    }

    event(rec) { this.model.event(rec); this.schedule(); }

    schedule() {
      if (this.timer) return;
      this.timer = setTimeout(() => { this.timer = null; this.render(); }, 120);
    }

    /** The final answer JSON ({question, answer, method, passages, usage, error, metrics, trace}). */
    setAnswer(ans) {
      this.answer = ans || {};
      if (this.answer.trace) this.model = TraceModel.fromTrace(this.answer.trace);
      this.model.addPassages(this.answer.passages, true);
      this.live = false;
      this.done = true;
      this.render();
    }

    fail(message) {
      this.live = false;
      this.done = true;
      this.status = message;
      this.render();
    }

    // -- state kept across re-renders ------------------------------------------------------
    details(key, defaultOpen, cls, summary, ...body) {
      const open = this.openState.has(key) ? this.openState.get(key) : defaultOpen;
      const d = h("details", { class: cls, "data-key": key }, h("summary", null, summary), body);
      d.open = open;
      d.addEventListener("toggle", () => this.openState.set(key, d.open));
      return d;
    }

    fk(el, key) { el.dataset.fk = `${this.prefix}:${key}`; return el; }

    render() {
      if (this.timer) { clearTimeout(this.timer); this.timer = null; }
      const active = document.activeElement;
      const focusKey = active && this.el.contains(active) ? active.dataset.fk : null;
      const scrollY = window.scrollY;
      const parts = [this.renderAnswer(), this.renderReasoning(), this.renderSteps(), this.renderPassages()];
      this.el.replaceChildren(...parts.filter(Boolean));
      if (focusKey) {
        const again = this.el.querySelector(`[data-fk="${CSS.escape(focusKey)}"]`);
        if (again) again.focus({ preventScroll: true });
      }
      window.scrollTo({ top: scrollY });
    }

    // -- answer and cost ---------------------------------------------------------------------
    renderAnswer() {
      const a = this.answer;
      const root = this.model.root;
      const box = h("section", { class: "tv-answer", "aria-label": "Answer" });
      const method = (a && a.method) || (root && root.inputs && root.inputs.method) || this.opts.method || "";
      const head = h("div", { class: "answer-head" }, h("h3", { text: "Answer" }), method ? badge(method, "method") : null);
      box.appendChild(head);
      if (this.opts.gold !== undefined) {
        box.appendChild(h("p", { class: "gold" }, h("span", { class: "label", text: "gold" }), " ", (this.opts.gold || []).join(" | ") || "—"));
      }
      if (a) {
        const text = a.answer ?? a.prediction ?? "";
        box.appendChild(h("p", { class: "answer-text" + (text ? "" : " muted"), text: text || "(no answer)" }));
        if (a.error) box.appendChild(h("p", { class: "tv-error", text: `Error: ${a.error}` }));
      } else {
        const n = this.model.steps.size;
        const secs = ((performance.now() - this.started) / 1000).toFixed(1);
        const msg = this.status || (this.live ? `running… ${plural(n, "step")} so far, ${secs} s` : "no answer");
        box.appendChild(h("p", { class: "answer-text muted" + (this.live ? " running" : ""), text: msg }));
      }
      box.appendChild(this.renderCost());
      const metrics = a && a.metrics && Object.keys(a.metrics).length ? a.metrics : null;
      if (metrics) {
        box.appendChild(h("div", { class: "metrics" }, Object.entries(metrics).map(([k, v]) =>
          h("span", { class: "metric" }, h("span", { class: "label", text: k }), " ", fmtNum(v)))));
      }
      return box;
    }

    renderCost() {
      const usage = this.answer && this.answer.usage;
      let c;
      if (usage) {
        c = { llm: usage.llm_calls, cached: usage.cache_hits, prompt: usage.prompt_tokens, completion: usage.completion_tokens,
              evaluated: usage.prompt_tokens_evaluated ?? usage.prompt_tokens,
              retrievals: usage.retrieval_calls, seconds: usage.seconds };
      } else {
        const t = { llm: 0, cached: 0, prompt: 0, evaluated: 0, completion: 0, retrievals: 0 };
        for (const s of this.model.steps.values()) {
          const o = ownCost(s);
          for (const k of Object.keys(t)) t[k] += o[k];
        }
        t.seconds = this.live ? (performance.now() - this.started) / 1000 : (this.model.root ? this.model.root.seconds : undefined);
        c = t;
      }
      const cell = (label, value, cls) => h("div", { class: `cost-cell ${cls}` }, h("span", { class: "value", text: value }), h("span", { class: "label", text: label }));
      return h("div", { class: "tv-cost", role: "group", "aria-label": usage ? "Total cost" : "Cost so far" },
        cell("LLM calls", fmtNum(c.llm ?? 0) + (c.cached ? ` (${fmtNum(c.cached)} cached)` : ""), "cost-llm"),
        cell("prompt tokens", fmtNum(c.prompt ?? 0) + (c.evaluated !== undefined && c.evaluated !== c.prompt
          ? ` (${fmtNum(c.evaluated)} evaluated)` : ""), "cost-prompt"),
        cell("completion tokens", fmtNum(c.completion ?? 0), "cost-completion"),
        cell("retrieval calls", fmtNum(c.retrievals ?? 0), "cost-retrievals"),
        cell("seconds", c.seconds === undefined ? "—" : fmtNum(c.seconds, 2), "cost-seconds"),
        usage ? null : h("span", { class: "cost-note muted", text: this.live ? "so far" : "from the trace" }));
    }

    // -- passages and LLM calls as buttons -------------------------------------------------------
    passageButton(id, title, score, where) {
      const e = this.model.passage(id, title);
      const label = e.title || String(id);
      const b = h("button", { type: "button", class: "passage-link" + (e.used ? " used" : ""), title: `passage ${id}`,
                              dataset: { passageId: String(id) } },
        h("span", { class: "ptitle", text: short(label, 60) }),
        score !== undefined && score !== null ? h("span", { class: "pscore", text: fmtNum(score, 2) }) : null);
      this.fk(b, `p:${where}:${id}`);
      b.addEventListener("click", () => showPassage(this.model.passage(id)));
      return b;
    }

    passageList(refs, where) {
      return h("span", { class: "passages" }, (refs || []).map((p, i) => typeof p === "object" && p !== null
        ? this.passageButton(p.id, p.title, p.score ?? p.sigma, `${where}:${i}`)
        : this.passageButton(p, "", undefined, `${where}:${i}`)));
    }

    llmButtons(s) {
      return (s.llm_calls || []).map((c, i) => {
        const tok = c.type === "loglikelihood" ? `${fmtNum(c.prompt_tokens)} tok` : `${fmtNum(c.prompt_tokens)}+${fmtNum(c.completion_tokens)} tok`;
        const b = h("button", { type: "button", class: "llm-link" + (c.error ? " failed" : ""), dataset: { step: String(s.id), call: String(i) } },
          `LLM ${i + 1}: ${c.type || "generate"} · ${tok} · ${fmtSec(c.seconds)}${c.cached ? " · cached" : ""}${c.error ? " · error" : ""}`);
        this.fk(b, `llm:${s.id}:${i}`);
        b.addEventListener("click", () => showLlmCall(c, `${s.kind} #${s.id}`));
        return b;
      });
    }

    jumpButton(s, text) {
      const b = h("button", { type: "button", class: "jump link", text: text || `step #${s.id}`, title: "show this step in the step tree" });
      this.fk(b, `jump:${s.id}:${text || ""}`);
      b.addEventListener("click", () => this.reveal(s.id));
      return b;
    }

    /** Open the step tree down to a step and move focus to it. */
    reveal(id) {
      let s = this.model.steps.get(id);
      this.openState.set("sec:steps", true);
      while (s) {
        this.openState.set(`step:${s.id}`, true);
        s = s.parentId !== null ? this.model.steps.get(s.parentId) : null;
      }
      this.render();
      const el = this.el.querySelector(`[data-step-id="${CSS.escape(String(id))}"] > summary`);
      if (el) { el.scrollIntoView({ block: "center" }); el.focus(); }
    }

    // -- a value of a step's inputs / outputs, as text (passage ids as buttons) ---------------------
    value(v, where, depth = 0) {
      if (v === null || v === undefined) return h("span", { class: "muted", text: "null" });
      if (typeof v === "boolean" || typeof v === "number") return h("span", { class: "num", text: fmtNum(v, 4) });
      if (typeof v === "string") {
        if (this.model.passages.has(v)) return this.passageButton(v, "", undefined, where);
        if (v.length > 160 || v.includes("\n")) {
          if (v.length > 800) {
            return this.details(`v:${where}`, false, "long", `${short(v, 100)} (${fmtNum(v.length)} chars)`, textBlock(v));
          }
          return textBlock(v);
        }
        return h("span", { class: "str", text: v });
      }
      if (depth > 4) return textBlock(JSON.stringify(v, null, 1));
      if (Array.isArray(v)) {
        if (!v.length) return h("span", { class: "muted", text: "[]" });
        if (v.every((x) => typeof x === "string" && this.model.passages.has(x))) return this.passageList(v, where);
        if (v.every((x) => x && typeof x === "object" && !Array.isArray(x) && x.id !== undefined && this.model.passages.has(String(x.id)))
            && v.every((x) => Object.keys(x).length <= 4)) {
          return h("span", { class: "passages" }, v.map((x, i) => this.passageButton(String(x.id), x.title, x.score ?? x.sigma ?? x.nll, `${where}:${i}`)));
        }
        if (v.every((x) => x === null || ["string", "number", "boolean"].includes(typeof x))) {
          const joined = v.map((x) => (typeof x === "number" ? fmtNum(x, 4) : String(x))).join(", ");
          if (joined.length <= 160 && v.every((x) => typeof x !== "string" || x.length < 60)) return h("span", { class: "list", text: `[${joined}]` });
          return h("ol", { class: "values" }, v.map((x, i) => h("li", null, this.value(x, `${where}.${i}`, depth + 1))));
        }
        const keys = [...new Set(v.flatMap((x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.keys(x) : [])))];
        if (v.every((x) => x && typeof x === "object" && !Array.isArray(x)) && keys.length <= 8) {
          return h("table", { class: "mini" }, h("thead", null, h("tr", null, keys.map((k) => h("th", { scope: "col", text: k })))),
            h("tbody", null, v.map((x, i) => h("tr", null, keys.map((k) => h("td", null, x[k] === undefined ? "" : this.value(x[k], `${where}.${i}.${k}`, depth + 1)))))));
        }
        return h("ol", { class: "values" }, v.map((x, i) => h("li", null, this.value(x, `${where}.${i}`, depth + 1))));
      }
      if (typeof v === "object") {
        const entries = Object.entries(v);
        if (!entries.length) return h("span", { class: "muted", text: "{}" });
        return h("dl", { class: "kv-list" }, entries.map(([k, x]) => [h("dt", { text: k }), h("dd", null, this.value(x, `${where}.${k}`, depth + 1))]));
      }
      return h("span", { text: String(v) });
    }

    fields(obj, where, skip = []) {
      const entries = Object.entries(obj || {}).filter(([k]) => !skip.includes(k));
      if (!entries.length) return null;
      return h("dl", { class: "kv-list" }, entries.map(([k, v]) => [h("dt", { text: k }), h("dd", null, this.value(v, `${where}.${k}`))]));
    }

    // -- the generic step tree ---------------------------------------------------------------------
    renderSteps() {
      const roots = this.model.roots;
      const n = this.model.steps.size;
      if (!n) return null;
      const list = h("ol", { class: "steps", role: "list" }, roots.map((s) => h("li", null, this.renderStep(s, 0))));
      return this.details("sec:steps", true, "tv-section tv-steps", [h("h3", { class: "inline", text: "Steps" }), " ", h("span", { class: "muted", text: `(${plural(n, "step")})` })], list);
    }

    stepSummary(s) {
      const bits = [badge(s.kind, "kind")];
      const inputs = s.inputs || {};
      for (const k of KEY_INPUTS) {
        if (inputs[k] === undefined || inputs[k] === null || typeof inputs[k] === "object") continue;
        if (k === "question" && s.kind === "question") { bits.push(h("span", { class: "key-input", text: short(inputs[k], 120) })); break; }
        bits.push(h("span", { class: "key-input" }, h("span", { class: "label", text: k }), " ", short(inputs[k], 100)));
        if (typeof inputs[k] === "string") break;
      }
      const out = s.outputs || {};
      for (const k of ["answer", "action", "route", "subquestion", "sentence", "follow_up", "stop", "reason"]) {
        if (out[k] === undefined || out[k] === null || typeof out[k] === "object") continue;
        bits.push(h("span", { class: "key-output" }, "→ ", h("span", { class: "label", text: k }), " ", short(String(out[k]), 80)));
        break;
      }
      const own = ownCost(s);
      const meta = [s.running ? "running…" : fmtSec(s.seconds)];
      if (own.llm) meta.push(plural(own.llm, "LLM call"));
      if (own.prompt || own.completion) meta.push(`${fmtNum(own.prompt + own.completion)} tok`);
      if (own.retrievals) meta.push(plural(own.retrievals, "retrieval"));
      bits.push(h("span", { class: "step-meta" + (s.running ? " running" : ""), text: meta.join(" · ") }));
      const parses = (s.events || []).filter((e) => e.message === "parse");
      const notes = (s.events || []).length - parses.length;
      for (const st of ["failed", "fallback"]) {
        const n = parses.filter((e) => e.status === st).length;
        if (n) bits.push(badge(`parse ${st}${n > 1 ? ` ×${n}` : ""}`, st === "failed" ? "error" : "note"));
      }
      if (notes) bits.push(badge(`${notes} note${notes > 1 ? "s" : ""}`, "note"));
      if (s.error) bits.push(badge("error", "error"));
      return bits;
    }

    renderStep(s, depth) {
      const where = `s${s.id}`;
      const body = h("div", { class: "step-body" });
      const ins = this.fields(s.inputs, `${where}.in`, s.kind === "question" ? ["config"] : []);
      if (ins) body.appendChild(h("div", { class: "io" }, h("h4", { text: "inputs" }), ins));
      if (s.kind === "question" && s.inputs && s.inputs.config) {
        body.appendChild(this.details(`cfg:${s.id}`, false, "config", "configuration", this.fields(s.inputs.config, `${where}.cfg`)));
      }
      const outs = this.fields(s.outputs, `${where}.out`);
      if (outs) body.appendChild(h("div", { class: "io" }, h("h4", { text: "outputs" }), outs));
      if (s.hop) {
        body.appendChild(h("p", { class: "hop-line" }, badge(s.hop.label || "hop", "hop"), " ", s.hop.question || "",
          s.hop.answer ? [" → ", h("strong", { text: s.hop.answer })] : ""));
      }
      if (s.error) body.appendChild(h("p", { class: "tv-error", text: `Error: ${s.error}` }));
      if ((s.events || []).length) {
        body.appendChild(h("ul", { class: "events" }, s.events.map((e, i) => {
          const { message, ...rest } = e;
          if (message === "traceback") return h("li", null, this.details(`tb:${s.id}:${i}`, false, "", "traceback", textBlock(rest.text)));
          if (message === "parse") {
            const { field, status, how, ...more } = rest;
            const extra = Object.keys(more).length ? ` (${Object.entries(more).map(([k, v]) => `${k}: ${asText(v)}`).join(", ")})` : "";
            return h("li", { class: `parse parse-${status}` }, badge(`parse ${status}`, status === "failed" ? "error" : status === "fallback" ? "note" : "ok"),
              ` ${field || "output"}${how ? ` read by ${how}` : ""}${extra}`);
          }
          const extra = Object.keys(rest).length ? ` (${Object.entries(rest).map(([k, v]) => `${k}: ${asText(v)}`).join(", ")})` : "";
          return h("li", null, h("span", { class: "note-mark", "aria-hidden": "true", text: "!" }), " ", `${message}${extra}`);
        })));
      }
      if ((s.llm_calls || []).length) body.appendChild(h("div", { class: "calls" }, this.llmButtons(s)));
      for (const [i, r] of (s.retrievals || []).entries()) {
        body.appendChild(h("div", { class: "retrieval" },
          h("span", { class: "label", text: `search${r.retriever ? ` (${r.retriever})` : ""}` }), " ", h("q", { text: r.query || "" }),
          ` k=${r.k ?? "?"} · ${fmtSec(r.seconds)} `, this.passageList(r.passages, `${where}.r${i}`)));
      }
      if (s.children.length) {
        const c = subtreeCost(s);
        body.appendChild(h("p", { class: "subtree-cost muted", text: `with its ${plural(c.steps - 1, "sub-step")}: ${costText(c)}` }));
        body.appendChild(h("ol", { class: "steps" }, s.children.map((c2) => h("li", null, this.renderStep(c2, depth + 1)))));
      }
      const d = this.details(`step:${s.id}`, depth < 2, `step${s.error ? " has-error" : ""}${s.running ? " running" : ""}`,
        this.stepSummary(s), body);
      d.dataset.stepId = String(s.id);
      d.dataset.kind = s.kind;
      d.id = `${this.prefix}-step-${s.id}`;
      return d;
    }

    // -- all passages ------------------------------------------------------------------------------
    renderPassages() {
      const ps = [...this.model.passages.values()];
      if (!ps.length) return null;
      ps.sort((a, b) => (b.used - a.used) || ((b.score ?? -Infinity) - (a.score ?? -Infinity)));
      const list = h("ul", { class: "passage-table plain" }, ps.map((p) => h("li", null,
        this.passageButton(p.id, p.title, p.score, "all"), " ",
        p.used ? badge("behind the answer", "used") : null,
        p.text ? h("span", { class: "muted preview", text: short(p.text, 120) }) : null)));
      return this.details("sec:passages", false, "tv-section tv-passages",
        [h("h3", { class: "inline", text: "Passages" }), " ", h("span", { class: "muted", text: `(${ps.length})` })], list);
    }

    // -- method-specific reasoning views -------------------------------------------------------------
    methodKind() {
      const root = this.model.root;
      const name = String((root && root.inputs && root.inputs.method) || (this.answer && this.answer.method) || this.opts.method || "");
      const kinds = new Set(this.model.all().map((s) => s.kind));
      if (kinds.has("traverse") && (name === "hgot" || kinds.has("plan"))) return "hgot";
      if (kinds.has("node") && kinds.has("tree")) return "tor";
      if (kinds.has("self-dc")) return "self-dc";
      return "chain";
    }

    renderReasoning() {
      if (!this.model.steps.size) return null;
      const kind = this.methodKind();
      let title, body;
      try {
        if (kind === "hgot") { title = "Reasoning: HGOT plan graphs"; body = this.renderHgot(); }
        else if (kind === "tor") { title = "Reasoning: Tree of Reviews"; body = this.renderTor(); }
        else if (kind === "self-dc") { title = "Reasoning: Self-DC recursion"; body = this.renderSelfDc(); }
      } catch (e) {
        console.error(e);
        body = null;
      }
      const hops = this.model.hops();
      const chain = hops.length ? h("div", null, this.renderChain(hops), this.chainEnd()) : null;
      if (!body) {
        title = "Reasoning: hops";
        body = chain || h("p", { class: "muted", text: this.live ? "waiting for the first hop…" : "This method has no hops: see its steps below." });
        return this.details("sec:reasoning", true, "tv-section tv-reasoning", h("h3", { class: "inline", text: title }), h("div", { class: `view-${kind}` }, body));
      }
      return this.details("sec:reasoning", true, "tv-section tv-reasoning", h("h3", { class: "inline", text: title }),
        h("div", { class: `view-${kind}` }, body),
        chain ? this.details("sec:hops", false, "tv-subsection", `All ${plural(hops.length, "hop")} in order`, chain) : null);
    }

    renderChain(hops) {
      return h("ol", { class: "chain" }, hops.map((hp, i) => h("li", { class: `hop depth-${Math.min(hp.depth, 6)}`, style: null, dataset: { step: String(hp.step) } },
        h("div", { class: "hop-head" },
          h("span", { class: "hop-n", text: `${i + 1}` }),
          badge(hp.label || "hop", `hop ${hopClass(hp.label)}`),
          h("span", { class: "hop-q", text: hp.question }),
          this.jumpButton(this.model.steps.get(hp.step))),
        hp.answer ? h("div", { class: "hop-a" }, h("span", { class: "arrow", "aria-hidden": "true", text: "↳ " }), h("span", { class: "sr-only", text: "answer: " }), hp.answer)
          : (hp.running ? h("div", { class: "hop-a muted", text: "…" }) : null),
        hp.passages && hp.passages.length ? h("div", { class: "hop-p" }, this.passageList(hp.passages, `hop${i}`)) : null)));
    }

    /** How a chain ended: stop reasons and the final reading step of the method. */
    chainEnd() {
      const root = this.model.root;
      if (!root) return null;
      const lines = [];
      for (const c of root.children) {
        const o = c.outputs || {};
        if (typeof o.stop_reason === "string") lines.push(h("li", null, badge("stop", "stop"), " ", `${c.kind}: ${o.stop_reason}`, " ", this.jumpButton(c)));
        const notes = (c.events || []).filter((e) => e.message && e.message !== "parse" && /stop|finish|final/i.test(e.message));
        for (const e of notes) lines.push(h("li", null, badge("note", "note"), " ", `${c.kind}: ${e.message}`, " ", this.jumpButton(c)));
      }
      const last = [...root.children].reverse().find((c) => !c.hop && c.outputs && c.outputs.answer !== undefined);
      if (last) {
        lines.push(h("li", null, badge(last.kind, "kind"), " ", h("strong", { text: last.outputs.answer || "(none)" }),
          last.outputs.parsed_by ? h("span", { class: "muted", text: ` (read by ${last.outputs.parsed_by})` }) : null, " ", this.jumpButton(last)));
      }
      return lines.length ? h("ul", { class: "chain-end plain" }, lines) : null;
    }

    // HGOT: each traverse (a query at a depth) with its probe, plan DAG (steps by level, each
    // with the answer and confidence of its own traverse), STOP and infer.
    renderHgot() {
      const root = this.model.root;
      const tops = (root ? root.children : this.model.roots).filter((s) => s.kind === "traverse");
      if (!tops.length) return null;
      const demos = this.model.ofKind("demonstrations")[0];
      return h("div", { class: "hgot" },
        demos ? h("p", { class: "muted" }, "Bootstrapped demonstrations: ", this.value(demos.outputs, "demos")) : null,
        tops.map((t) => this.hgotTraverse(t)));
    }

    hgotTraverse(t) {
      const child = (k) => t.children.find((c) => c.kind === k);
      const probe = child("probe"), plan = child("plan"), stop = child("stop"), search = child("search"), infer = child("infer");
      const depth = t.inputs.depth ?? 0;
      const out = t.outputs || {};
      const box = h("div", { class: "hgot-traverse", dataset: { stepId: String(t.id) } });
      box.appendChild(h("div", { class: "hgot-head" },
        badge(`depth ${depth}`, "depth"), h("span", { class: "hgot-q", text: t.inputs.query || "" }),
        t.running ? badge("running", "running") : null, this.jumpButton(t)));
      if (out.answer !== undefined) {
        box.appendChild(h("p", { class: "hgot-answer" }, h("span", { class: "label", text: "answer" }), " ", h("strong", { text: out.answer || "(none)" }),
          " ", confidence(out.ci, "confidence (CI)"),
          out.stopped ? badge("stopped: answered from its own passages", "stop") : null));
      }
      if (probe) box.appendChild(this.hgotPredict("probe", probe));
      let stopLine = null;
      if (stop) {
        const so = stop.outputs || {};
        const why = so.stop === true ? `stop: ${so.reason || "yes"}` : so.stop === false ? "go on: the plan's steps are traversed" : "…";
        stopLine = h("p", { class: "hgot-stop" }, h("span", { class: "label", text: "STOP" }), " ", why,
          so.similarity !== undefined ? ` (similarity ${fmtNum(so.similarity, 3)})` : "");
      }
      if (plan) box.appendChild(this.hgotPlan(plan, search, stop, stopLine));
      else if (stopLine) box.appendChild(stopLine);
      if (infer) box.appendChild(this.hgotPredict("infer", infer));
      return box;
    }

    hgotPredict(label, s) {
      const o = s.outputs || {};
      const sel = o.selected || (o.passages || []).map((id, i) => ({ id, sigma: (o.sigma_after || [])[i] }));
      return h("div", { class: `hgot-predict ${label}` },
        h("span", { class: "label", text: label }), " ",
        o.answer !== undefined ? [h("strong", { text: o.answer || "(none)" }), " ", confidence(o.ci, "confidence")] : (s.running ? "…" : ""),
        o.votes && Object.keys(o.votes).length ? h("span", { class: "votes muted", text: ` votes: ${Object.entries(o.votes).map(([k, v]) => `${k} ${fmtNum(v, 2)}`).join("; ")}` }) : null,
        sel.length ? h("div", { class: "hgot-passages" }, h("span", { class: "label", text: label === "infer" ? "pooled passages (σ)" : "passages (σ after)" }), " ",
          h("span", { class: "passages" }, sel.map((x, i) => this.passageButton(String(x.id), "", x.sigma, `${label}${s.id}:${i}`)))) : null,
        " ", this.llmButtons(s));
    }

    hgotPlan(plan, search, stop, stopLine) {
      const o = plan.outputs || {};
      const steps = o.steps || [];
      const edges = (o.edges || []).filter((e) => Array.isArray(e) && e.length === 2);
      const levels = o.levels && o.levels.length ? o.levels : [steps.map((_, i) => i + 1)];
      const box = h("div", { class: "hgot-plan" });
      box.appendChild(h("div", { class: "plan-head" }, h("span", { class: "label", text: "plan" }), " ",
        steps.length ? `${plural(steps.length, "step")} in ${plural(levels.length, "level")}` : (plan.running ? "…" : "empty plan"),
        edges.length ? ` · dependencies ${edges.map((e) => `${e[0]}→${e[1]}`).join(", ")}` : (steps.length > 1 ? " · independent steps" : ""),
        " ", this.llmButtons(plan)));
      if (stopLine) box.appendChild(stopLine);
      if (!steps.length) return box;
      // each plan step's own traverse (and rewrite) inside the search step
      const trav = search ? search.children.filter((c) => c.kind === "traverse") : [];
      const rewrites = search ? search.children.filter((c) => c.kind === "rewrite") : [];
      const used = new Set();
      const info = steps.map((q, idx) => {
        const i = idx + 1;
        const rw = rewrites.find((r) => r.inputs.step === i);
        const asked = rw && rw.outputs && rw.outputs.rewritten ? rw.outputs.rewritten : q;
        let node = trav.find((t) => !used.has(t.id) && t.inputs.query === asked) || trav.find((t) => !used.has(t.id) && t.inputs.query === q);
        if (node) used.add(node.id);
        return { i, q, asked, rewrite: rw, node };
      });
      // leftovers in level order (should not happen)
      const order = levels.flat();
      for (const i of order) {
        const it = info[i - 1];
        if (it && !it.node) { const t = trav.find((x) => !used.has(x.id)); if (t) { it.node = t; used.add(t.id); } }
      }
      if (!search) {
        const st = stop && stop.outputs ? stop.outputs : {};
        box.appendChild(h("ol", { class: "plan-steps" }, info.map((it) => h("li", { class: "plan-step", value: String(it.i) }, h("span", { class: "step-q", text: it.q })))));
        if (!st.stop) box.appendChild(h("p", { class: "muted", text: plan.running || (stop && stop.running) || !stop ? "…" : "not traversed" }));
        return box;
      }
      box.appendChild(this.planGraph(info, edges, levels, plan.id));
      const ol = h("ol", { class: "plan-steps" });
      for (const it of info) {
        const n = it.node;
        const no = (n && n.outputs) || {};
        const deps = edges.filter((e) => e[1] === it.i).map((e) => e[0]);
        const expanded = n && n.children.some((c) => c.kind === "plan");
        const li = h("li", { class: "plan-step", value: String(it.i), dataset: { stepIndex: String(it.i) } },
          h("div", null, h("span", { class: "step-q", text: it.q }),
            deps.length ? h("span", { class: "muted", text: ` (depends on step${deps.length > 1 ? "s" : ""} ${deps.join(", ")})` }) : null),
          it.rewrite ? h("div", { class: "rewrite muted" }, "rewritten: ", h("q", { text: it.asked })) : null,
          n ? h("div", { class: "step-a" }, "↳ ", no.answer !== undefined ? h("strong", { text: no.answer || "(none)" }) : (n.running ? "…" : ""), " ",
            confidence(no.ci, "confidence"), " ", this.jumpButton(n)) : h("div", { class: "muted", text: "not traversed yet" }));
        if (n && expanded) {
          const searched = n.children.some((c) => c.kind === "search");
          li.appendChild(this.details(`hgot:${n.id}`, searched, "hgot-sub",
            searched ? `step ${it.i} planned and searched further (depth ${n.inputs.depth})` : `step ${it.i}: probe, plan and STOP (depth ${n.inputs.depth})`,
            this.hgotTraverse(n)));
        } else if (n) {
          const probe = n.children.find((c) => c.kind === "probe");
          if (probe) li.appendChild(this.hgotPredict("probe", probe));
        }
        ol.appendChild(li);
      }
      box.appendChild(ol);
      return box;
    }

    /** A plan's DAG as SVG: levels as columns, an arrow for each dependency. */
    planGraph(info, edges, levels, planId) {
      const W = 250, H = 84, GX = 56, GY = 14, PAD = 8;
      const pos = new Map();
      levels.forEach((lvl, col) => lvl.forEach((i, row) => pos.set(i, { x: PAD + col * (W + GX), y: PAD + row * (H + GY) })));
      info.forEach((it) => { if (!pos.has(it.i)) pos.set(it.i, { x: PAD, y: PAD + pos.size * (H + GY) }); });
      const width = PAD * 2 + levels.length * W + (levels.length - 1) * GX;
      const height = PAD * 2 + Math.max(...[...pos.values()].map((p) => p.y - PAD)) + H;
      const markerId = `${this.prefix}-arrow-${planId}`;
      const root = svg("svg", { class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
        "aria-label": `plan graph: ${info.length} steps in ${levels.length} levels${edges.length ? ", dependencies " + edges.map((e) => `${e[0]} to ${e[1]}`).join(", ") : ""}` });
      root.appendChild(svg("defs", null, svg("marker", { id: markerId, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))));
      for (const [a, b] of edges) {
        const p = pos.get(a), q = pos.get(b);
        if (!p || !q) continue;
        const x1 = p.x + W, y1 = p.y + H / 2, x2 = q.x, y2 = q.y + H / 2;
        const mx = (x1 + x2) / 2;
        const d = x2 > x1 ? `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2 - 2} ${y2}`
          : `M ${p.x + W / 2} ${p.y + H} L ${q.x + W / 2} ${q.y - 2}`;
        root.appendChild(svg("path", { d, class: "edge", "marker-end": `url(#${markerId})` }));
      }
      for (const it of info) {
        const p = pos.get(it.i);
        const no = (it.node && it.node.outputs) || {};
        const ci = typeof no.ci === "number" ? no.ci : null;
        const g = svg("g", { class: `dag-node${it.node && it.node.running ? " running" : ""}${ci === null ? "" : ci >= 0.7 ? " high" : ci >= 0.4 ? " mid" : " low"}`,
                             transform: `translate(${p.x},${p.y})` });
        g.appendChild(svg("title", { text: `Step ${it.i}: ${it.asked}${no.answer !== undefined ? `\nanswer: ${no.answer}` : ""}${ci !== null ? `\nconfidence ${fmtNum(ci, 3)}` : ""}` }));
        g.appendChild(svg("rect", { width: W, height: H, rx: 6 }));
        g.appendChild(svg("text", { x: 8, y: 16, class: "dag-label", text: `Step ${it.i}` }));
        wrapLines(it.asked, 38, 2).forEach((line, k) => g.appendChild(svg("text", { x: 8, y: 33 + k * 15, class: "dag-q", text: line })));
        const ans = no.answer !== undefined ? `→ ${no.answer || "(none)"}` : (it.node && it.node.running ? "→ …" : "");
        g.appendChild(svg("text", { x: 8, y: 74, class: "dag-a", text: short(ans, ci === null ? 36 : 25) }));
        if (ci !== null) {
          g.appendChild(svg("rect", { x: W - 58, y: 64, width: 50, height: 6, rx: 3, class: "ci-bg" }));
          g.appendChild(svg("rect", { x: W - 58, y: 64, width: Math.max(1, 50 * Math.min(1, ci)), height: 6, rx: 3, class: "ci-fg" }));
          g.appendChild(svg("text", { x: W - 8, y: 58, class: "dag-ci", "text-anchor": "end", text: `ci ${fmtNum(ci, 2)}` }));
        }
        root.appendChild(g);
      }
      return h("div", { class: "dag-wrap" }, root);
    }

    // Tree of Reviews: the root retrieval, then each node (a paragraph on its path) with its
    // review's action (accept / reject / search / stop), why, its search and pruned paragraphs.
    renderTor() {
      const root = this.model.root;
      const top = root ? root.children : this.model.roots;
      const tree = top.find((s) => s.kind === "tree");
      const first = top.find((s) => s.kind === "retrieve");
      const read = top.find((s) => s.kind === "read");
      if (!tree) return null;
      const to = tree.outputs || {};
      const box = h("div", { class: "tor" });
      box.appendChild(h("p", { class: "tor-head" },
        h("span", { class: "label", text: "tree" }), ` depth ${tree.inputs.depth ?? "?"}, widths ${asText(tree.inputs.widths)}, expansion ${tree.inputs.expansion ?? "?"}`,
        to.docs_reviewed !== undefined ? ` · ${plural(to.docs_reviewed, "paragraph")} reviewed` : "", " ", this.jumpButton(tree)));
      if (first) {
        box.appendChild(h("p", { class: "tor-root" }, h("span", { class: "label", text: "retrieve" }), " ", h("q", { text: first.inputs.query || "" }), " ",
          this.passageList(((first.retrievals || [])[0] || {}).passages || first.outputs.passages || [], `tor-root`)));
      }
      const nodes = tree.children.filter((c) => c.kind === "node");
      box.appendChild(h("ul", { class: "tor-tree", role: "list" }, nodes.map((n) => this.torNode(n))));
      const counts = {};
      for (const n of this.model.ofKind("node")) { const a = (n.outputs || {}).action || (n.running ? "reviewing" : "?"); counts[a] = (counts[a] || 0) + 1; }
      box.appendChild(h("p", { class: "tor-counts muted", text: Object.entries(counts).map(([a, c]) => `${a}: ${c}`).join(" · ") }));
      if (to.evidence && to.evidence.length) {
        box.appendChild(h("div", { class: "tor-evidence" }, h("h4", { text: `Evidence pool (${to.evidence.length})` }),
          h("ol", null, to.evidence.map((ev, i) => h("li", null, this.passageList(ev.passages || [], `ev${i}`), ev.analysis ? h("div", { class: "analysis", text: ev.analysis }) : null)))));
      }
      if (read) {
        const ro = read.outputs || {};
        box.appendChild(h("p", { class: "tor-read" }, h("span", { class: "label", text: `read (${read.inputs.fusion || "?"} fusion)` }), " ",
          ro.answer !== undefined ? h("strong", { text: ro.answer || "(none)" }) : "…",
          ro.shown !== undefined ? h("span", { class: "muted", text: ` · ${ro.shown} of ${ro.available} evidence shown` }) : null, " ", this.llmButtons(read)));
      }
      return box;
    }

    torNode(n) {
      const o = n.outputs || {};
      const action = o.action || (n.running ? "reviewing" : "?");
      const notes = (n.events || []).filter((e) => e.message && e.message !== "parse").map((e) => e.message);
      const review = String(o.review || "");
      let why;
      if (action === "accept") why = `relevant and supported: into the evidence pool${n.hop && n.hop.answer ? ` (${n.hop.answer})` : ""}`;
      else if (action === "reject") why = notes.length ? `pruned: ${notes.join("; ")}` : (/irrelevant/i.test(review) ? "pruned: the review found the paragraph irrelevant" : "pruned by the review");
      else if (action === "search") why = "relevant but not enough: search for more";
      else if (action === "stop") why = `relevant, not supported, at the depth limit (${n.inputs.depth}): the branch stops`;
      else why = "";
      const ret = n.children.find((c) => c.kind === "retrieve");
      const expand = n.children.find((c) => c.kind === "expand");
      const kids = n.children.filter((c) => c.kind === "node");
      const li = h("li", { class: `tor-node action-${action}`, dataset: { stepId: String(n.id), action } },
        h("div", { class: "tor-line" },
          badge(action, `action ${action}`), " ",
          h("span", { class: "muted", text: `depth ${n.inputs.depth ?? "?"}` }), " ",
          this.passageButton(String(n.inputs.passage), n.inputs.title, undefined, `node${n.id}`), " ",
          h("span", { class: "why", text: why }), " ", this.jumpButton(n)),
        o.query && action === "search" ? h("div", { class: "tor-query" }, "query: ", h("q", { text: o.query })) : null,
        expand && expand.outputs && expand.outputs.info ? h("div", { class: "muted" }, "missing paragraph completion: ", h("q", { text: expand.outputs.info })) : null,
        review ? this.details(`rev:${n.id}`, false, "review", "review", textBlock(review), this.llmButtons(n)) : null,
        ret ? this.torSearch(ret) : null,
        kids.length ? h("ul", { class: "tor-tree" }, kids.map((k) => this.torNode(k))) : null);
      return li;
    }

    torSearch(r) {
      const o = r.outputs || {};
      const list = (ids, label, cls) => (ids && ids.length ? h("div", { class: `pruned ${cls}` }, h("span", { class: "label", text: label }), " ", this.passageList(ids, `${label}${r.id}`)) : null);
      return h("div", { class: "tor-search" },
        h("span", { class: "label", text: "searched" }), " ", h("q", { text: r.inputs.query || "" }), ` k=${r.inputs.k ?? "?"}`,
        list(o.kept, "kept", "kept"),
        list(o.pruned_repetitive, "pruned: already in the evidence pool", "rep"),
        list(o.pruned_on_path, "pruned: already on the path", "onpath"),
        o.kept && !o.kept.length ? h("div", { class: "muted", text: "nothing new: the branch ends here" }) : null);
    }

    // Self-DC: the recursion, each question with its confidence and route.
    renderSelfDc() {
      const root = this.model.root;
      const top = (root ? root.children : this.model.roots).filter((s) => s.kind === "self-dc");
      if (!top.length) return null;
      const cfg = (root && root.inputs && root.inputs.config) || {};
      const alpha = cfg.alpha ?? (cfg.confidence === "verb" ? 0.4 : 0.6);
      return h("div", { class: "selfdc" },
        cfg.beta !== undefined ? h("p", { class: "muted", text: `routes: confidence ≥ ${fmtNum(alpha + cfg.beta, 3)} generate-then-read; between ${fmtNum(alpha - cfg.beta, 3)} and ${fmtNum(alpha + cfg.beta, 3)} decompose; below retrieve-then-read` }) : null,
        h("ul", { class: "sdc-tree" }, top.map((s) => this.selfDcNode(s))));
    }

    selfDcNode(s) {
      const o = s.outputs || {};
      const dec = s.children.find((c) => c.kind === "decompose");
      const comb = s.children.find((c) => c.kind === "combine-sub-qas");
      const rtr = s.children.find((c) => c.kind === "retrieve-then-read");
      const gtr = s.children.find((c) => c.kind === "generate-then-read");
      const subs = s.children.filter((c) => c.kind === "self-dc");
      const route = o.route || (s.running ? "…" : "?");
      return h("li", { class: `sdc-node route-${String(route).replace(/[^a-z-]/g, "")}`, dataset: { stepId: String(s.id) } },
        h("div", { class: "sdc-line" },
          badge(`depth ${s.inputs.depth ?? "?"}`, "depth"), " ",
          h("span", { class: "sdc-q", text: s.inputs.question || "" }), " ", this.jumpButton(s)),
        h("div", { class: "sdc-meta" },
          confidence(o.confidence, "confidence"), " ", badge(route, `route ${route}`),
          o.reason ? h("span", { class: "muted", text: ` (${o.reason})` }) : null,
          o.answer !== undefined ? [" ↳ ", h("strong", { text: o.answer || "(none)" })] : null),
        (s.events || []).filter((e) => e.message !== "parse").map((e) => h("div", { class: "muted note", text: `! ${e.message}` })),
        rtr ? h("div", { class: "sdc-rtr" }, h("span", { class: "label", text: "retrieve-then-read" }), " ", this.passageList((rtr.outputs || {}).passages, `rtr${rtr.id}`)) : null,
        gtr && gtr.outputs && gtr.outputs.document ? this.details(`gtr:${gtr.id}`, false, "sdc-doc", "generated document", textBlock(gtr.outputs.document)) : null,
        dec && subs.length === 0 && dec.outputs && dec.outputs.subquestions ? h("div", { class: "muted" }, "decomposed into: ", (dec.outputs.subquestions || []).join(" | ")) : null,
        subs.length ? h("ul", { class: "sdc-tree" }, subs.map((c) => this.selfDcNode(c))) : null,
        comb && comb.outputs && comb.outputs.answer !== undefined ? h("div", { class: "sdc-combine" }, h("span", { class: "label", text: "combined" }), " ", h("strong", { text: comb.outputs.answer })) : null);
    }
  }

  function hopClass(label) {
    const l = String(label || "").toLowerCase();
    if (/accept/.test(l)) return "accept";
    if (/search|retrieve|query/.test(l)) return "search";
    if (/thought|reason/.test(l)) return "thought";
    return "";
  }

  function confidence(v, label) {
    if (typeof v !== "number") return null;
    const pct = Math.max(0, Math.min(1, v));
    return h("span", { class: "conf", title: `${label}: ${fmtNum(v, 4)}` },
      h("meter", { min: "0", max: "1", low: "0.4", high: "0.7", optimum: "1", value: String(pct), "aria-label": label }),
      h("span", { class: "conf-n", text: fmtNum(v, 2) }));
  }

  function wrapLines(text, width, max) {
    const words = String(text || "").split(/\s+/).filter(Boolean);
    const lines = [];
    let cur = "";
    for (const w of words) {
      if (!cur) cur = w;
      else if ((cur + " " + w).length <= width) cur += " " + w;
      else { lines.push(cur); cur = w; }
    }
    if (cur) lines.push(cur);
    if (lines.length > max) {
      const kept = lines.slice(0, max);
      kept[max - 1] = short(kept[max - 1] + " " + lines.slice(max).join(" "), width);
      return kept;
    }
    return lines.map((l) => short(l, width));
  }

  // ---------------------------------------------------------------------------------------
  // Tabs, API key
  // ---------------------------------------------------------------------------------------
  function selectTab(name, focus = false) {
    for (const t of ["ask", "runs"]) {
      const tab = $(`#tab-${t}`);
      const on = t === name;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
      show($(`#view-${t}`), on);
      if (on && focus) tab.focus();
    }
    if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
    if (name === "runs" && !runsState.loaded) loadRuns();
  }

  function setupTabs() {
    for (const t of ["ask", "runs"]) $(`#tab-${t}`).addEventListener("click", () => selectTab(t));
    $(".tabs").addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const cur = $("#tab-ask").getAttribute("aria-selected") === "true" ? "ask" : "runs";
      selectTab(cur === "ask" ? "runs" : "ask", true);
      e.preventDefault();
    });
  }

  function refreshKeyStatus() {
    const k = apiKey();
    $("#api-key-status").textContent = k ? "(set)" : "(none)";
    $("#api-key").value = k;
  }

  function setupKey() {
    $("#key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const v = $("#api-key").value.trim();
      try { if (v) sessionStorage.setItem(KEY_STORE, v); else sessionStorage.removeItem(KEY_STORE); } catch (err) { /* storage off */ }
      refreshKeyStatus();
      $("#key-box").open = false;
      if (!methodsLoaded) loadMethods();
      if (runsState.error) loadRuns();
    });
    $("#api-key-clear").addEventListener("click", () => {
      try { sessionStorage.removeItem(KEY_STORE); } catch (err) { /* storage off */ }
      refreshKeyStatus();
    });
    refreshKeyStatus();
  }

  // ---------------------------------------------------------------------------------------
  // Ask view
  // ---------------------------------------------------------------------------------------
  let methods = [];
  let methodsLoaded = false;
  let running = null; // AbortController of the question being answered

  function showError(box, message) {
    box.replaceChildren(h("strong", { text: "Error" }), " ", h("span", { class: "error-text", text: message }));
    show(box, !!message);
  }

  async function loadMethods() {
    const status = $("#ask-status");
    try {
      const data = await api("v1/methods");
      methods = Array.isArray(data) ? data : (data.methods || data.data || []);
      methodsLoaded = true;
      const sel = $("#method");
      const previous = sel.value;
      sel.replaceChildren(...methods.map((m) => h("option", { value: m.name, text: m.name })));
      const dflt = (data && !Array.isArray(data) && data.default) || (methods.find((m) => m.name === "ircot") || methods[0] || {}).name;
      if (previous && methods.some((m) => m.name === previous)) sel.value = previous; else if (dflt) sel.value = dflt;
      const rets = (data && !Array.isArray(data) && (data.retrievers || data.retriever_choices)) || ["bm25", "dense", "hybrid"];
      const rsel = $("#retriever");
      rsel.replaceChildren(h("option", { value: "", text: "server default" }), ...rets.map((r) => h("option", { value: r, text: r })));
      methodChanged();
      status.textContent = "";
      showError($("#ask-error"), "");
    } catch (e) {
      showError($("#ask-error"), `Could not load the methods: ${e.message}`);
    }
  }

  function currentMethod() {
    return methods.find((m) => m.name === $("#method").value) || null;
  }

  function methodChanged() {
    const m = currentMethod();
    const doc = $("#method-doc");
    doc.replaceChildren();
    if (!m) return;
    if (m.doc) doc.appendChild(h("span", { text: m.doc }));
    if (m.paper) doc.append(" ", h("span", { class: "muted paper", text: `— ${paperText(m.paper)}` }));
    const retrieves = m.retrieves ?? true;
    $("#k").disabled = retrieves === false;
    $("#retriever").disabled = retrieves === false;
    const kOpt = (m.options || []).find((o) => o.name === "k");
    $("#k").placeholder = retrieves === false ? "not used" : kOpt && kOpt.default !== null && kOpt.default !== undefined ? `default ${kOpt.default}` : "default";
    if (kOpt && kOpt.range && kOpt.range[1] !== null && kOpt.range[1] !== undefined) $("#k").max = String(kOpt.range[1]); else $("#k").removeAttribute("max");
    renderOptions(m);
  }

  function paperText(p) {
    if (typeof p === "string") return p;
    return [p.authors, p.title && `“${p.title}”`, p.year].filter(Boolean).join(", ");
  }

  function optionType(o) {
    const t = String(o.kind || o.type || "str").toLowerCase();
    if (o.choices && o.choices.length) return "choice";
    if (t.startsWith("bool")) return "bool";
    if (t.startsWith("int")) return "int";
    if (t.startsWith("float") || t === "number") return "float";
    if (t === "any" || t.startsWith("list") || t.startsWith("dict")) return "any";
    return "str";
  }

  function renderOptions(m) {
    const box = $("#options");
    box.replaceChildren();
    // k has its own field above
    const opts = (m.options || []).filter((o) => o.name !== "k");
    // the method's presets (GET /v1/methods): sent as the option "preset"; none = the paper's defaults
    const presets = Object.keys(m.presets || {});
    if (presets.length) {
      opts.unshift({ name: "preset", kind: "choice", choices: presets, default: null, optional: true,
                     doc: presets.map((p) => `${p}: ${Object.entries(m.presets[p].options).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")}` +
                                             (m.presets[p].doc ? ` (${m.presets[p].doc})` : "")).join("; ") });
    }
    $("#options-count").textContent = opts.length ? `(${opts.length})` : "(none)";
    for (const o of opts) {
      const id = `opt-${o.name}`;
      const type = optionType(o);
      const dflt = o.default;
      let input;
      if (type === "bool") {
        input = h("select", { id, "data-option": o.name, "data-type": type },
          h("option", { value: "true", text: "true" }), h("option", { value: "false", text: "false" }),
          o.optional || dflt === null ? h("option", { value: "null", text: "none" }) : null);
        input.value = dflt === null ? "null" : String(!!dflt);
      } else if (type === "choice") {
        input = h("select", { id, "data-option": o.name, "data-type": type },
          o.choices.map((c) => h("option", { value: JSON.stringify(c), text: c === null ? "none" : String(c) })),
          (o.optional || dflt === null) && !o.choices.includes(null) ? h("option", { value: "null", text: "none" }) : null);
        input.value = JSON.stringify(dflt ?? null);
      } else if (type === "int" || type === "float") {
        const range = o.range || [];
        input = h("input", { id, type: "number", "data-option": o.name, "data-type": type, step: type === "int" ? "1" : "any",
                              min: range[0] ?? undefined, max: range[1] ?? undefined, placeholder: dflt === null ? "none" : "" });
        input.value = dflt === null || dflt === undefined ? "" : String(dflt);
      } else {
        input = h("input", { id, type: "text", "data-option": o.name, "data-type": type, spellcheck: "false",
                              placeholder: dflt === null ? "none" : "" });
        input.value = dflt === null || dflt === undefined ? "" : (typeof dflt === "string" ? dflt : JSON.stringify(dflt));
        if (type === "any") input.title = "a JSON value";
      }
      input.dataset.default = JSON.stringify(dflt ?? null);
      input.addEventListener("input", () => markChanged(input));
      input.addEventListener("change", () => markChanged(input));
      const low = o.above !== undefined && o.above !== null ? `>${o.above}` : (o.range ? o.range[0] ?? "−∞" : null);
      const range = o.range || o.above !== undefined ? ` ${low ?? "−∞"}…${(o.range && o.range[1]) ?? "∞"}` : "";
      box.appendChild(h("div", { class: "option" },
        h("label", { for: id }, h("span", { class: "opt-name", text: o.name }), h("span", { class: "muted", text: ` ${type}${range}, default ${dflt === null || dflt === undefined ? "none" : JSON.stringify(dflt)}` })),
        input, o.doc || o.help ? h("span", { class: "opt-doc muted", text: o.doc || o.help }) : null));
    }
  }

  function optionValue(el) {
    const name = el.dataset.option, type = el.dataset.type;
    const dflt = JSON.parse(el.dataset.default);
    if (type === "bool") return el.value === "null" ? null : el.value === "true";
    if (type === "choice") return JSON.parse(el.value);
    if (type === "int" || type === "float") {
      if (el.value.trim() === "") return null;
      const v = Number(el.value);
      if (!Number.isFinite(v) || (type === "int" && !Number.isInteger(v))) throw new Error(`option ${name} must be ${type === "int" ? "a whole number" : "a number"}`);
      return v;
    }
    if (type === "any") {
      if (el.value.trim() === "") return null;
      try { return JSON.parse(el.value); } catch (e) { throw new Error(`option ${name} must be JSON`); }
    }
    return el.value === "" && dflt === null ? null : el.value;
  }

  function markChanged(el) {
    let changed;
    try { changed = JSON.stringify(optionValue(el)) !== el.dataset.default; } catch (e) { changed = true; }
    el.closest(".option").classList.toggle("changed", changed);
  }

  /** The options the user changed: {name: value}. Throws on a value that is not valid. */
  function changedOptions() {
    const out = {};
    for (const el of document.querySelectorAll("#options [data-option]")) {
      const v = optionValue(el);
      if (JSON.stringify(v) !== el.dataset.default) out[el.dataset.option] = v;
    }
    return out;
  }

  function setRunning(on) {
    $("#ask-submit").disabled = on;
    $("#ask-stop").disabled = !on;
    $("#ask-form").setAttribute("aria-busy", on ? "true" : "false");
  }

  async function ask(e) {
    e.preventDefault();
    const errBox = $("#ask-error");
    const status = $("#ask-status");
    showError(errBox, "");
    const question = $("#question").value.trim();
    if (!question) { showError(errBox, "Write a question first."); $("#question").focus(); return; }
    const body = { question, method: $("#method").value, stream: true };
    try {
      body.options = changedOptions();
    } catch (err) { showError(errBox, err.message); return; }
    const k = $("#k").value.trim();
    if (k && !$("#k").disabled) {
      const n = Number(k);
      if (!Number.isInteger(n) || n < 1) { showError(errBox, "k must be a whole number of at least 1."); return; }
      body.k = n;
    }
    const retriever = $("#retriever").value;
    if (retriever && !$("#retriever").disabled) body.retriever = retriever;
    const resultBox = $("#ask-result");
    show(resultBox, true);
    const view = new TraceView(resultBox, { live: true, method: body.method });
    const timer = setInterval(() => { if (view.live) view.schedule(); }, 1000);
    running = new AbortController();
    setRunning(true);
    status.textContent = `Asking ${body.method}…`;
    let gotAnswer = false;
    try {
      const resp = await api("v1/answer", { method: "POST", raw: true, signal: running.signal,
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" }, body: JSON.stringify(body) });
      const ctype = resp.headers.get("content-type") || "";
      if (!ctype.includes("text/event-stream")) {
        view.setAnswer(await resp.json());
        gotAnswer = true;
      } else {
        for await (const ev of sseEvents(resp)) {
          let data;
          try { data = JSON.parse(ev.data); } catch (err) { continue; }
          if (ev.event === "step") view.event(data);
          else if (ev.event === "answer") { view.setAnswer(data); gotAnswer = true; }
          else if (ev.event === "error") {
            const msg = formatDetail(data.detail ?? data);
            showError(errBox, msg);
            view.fail(`failed: ${msg}`);
          }
        }
      }
      if (gotAnswer) {
        const a = view.answer;
        status.textContent = a.error ? `Answered with an error (${a.method || body.method}).` : `Answered by ${a.method || body.method}.`;
      } else if (errBox.hidden) {
        showError(errBox, "The stream ended before the answer came.");
        view.fail("no answer: the stream ended early");
        status.textContent = "";
      } else status.textContent = "";
    } catch (err) {
      if (err.name === "AbortError") {
        view.fail("stopped");
        status.textContent = "Stopped.";
      } else {
        showError(errBox, err.message);
        view.fail("no answer");
        status.textContent = "";
      }
    } finally {
      clearInterval(timer);
      running = null;
      setRunning(false);
    }
  }

  function setupAsk() {
    $("#ask-form").addEventListener("submit", ask);
    $("#method").addEventListener("change", methodChanged);
    $("#ask-stop").addEventListener("click", () => { if (running) running.abort(); });
    $("#options-reset").addEventListener("click", () => { const m = currentMethod(); if (m) renderOptions(m); });
    $("#question").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("#ask-form").requestSubmit(); }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Runs view
  // ---------------------------------------------------------------------------------------
  const runsState = { loaded: false, error: false, list: [], run: "", a: null, b: null, sort: { key: "id", dir: 1 }, cache: new Map() };

  function runPath(run, method, params) {
    const q = params ? new URLSearchParams(params).toString() : "";
    // a run may contain '/' (kept as path separators); "" is a method directory right in the runs directory
    const prefix = run ? `${String(run).split("/").map(encodeURIComponent).join("/")}/` : "";
    return `v1/runs/${prefix}${encodeURIComponent(method)}${q ? "?" + q : ""}`;
  }

  async function loadRuns() {
    const status = $("#runs-status"), err = $("#runs-error");
    status.textContent = "Loading runs…";
    showError(err, "");
    try {
      const data = await api("v1/runs");
      runsState.list = data.runs || [];
      runsState.loaded = true;
      runsState.error = false;
      renderRunList();
      status.textContent = runsState.list.length ? "" : "No evaluation run found in the server's runs directory.";
    } catch (e) {
      runsState.error = true;
      status.textContent = "";
      showError(err, `Could not load the runs: ${e.message}`);
    }
  }

  function metricOf(obj, name) {
    const v = obj && obj.metrics ? obj.metrics[name] : undefined;
    return typeof v === "number" ? v : undefined;
  }

  function renderRunList() {
    const tbody = $("#runs-table tbody");
    $("#runs-count").textContent = `(${runsState.list.length})`;
    tbody.replaceChildren(...runsState.list.map((r) => {
      const cost = r.cost || {};
      const open = h("button", { type: "button", class: "run-open", text: "Open", "aria-label": `open ${r.run} ${r.method}` });
      open.addEventListener("click", () => openRun(r.run, r.method));
      return h("tr", { dataset: { run: r.run, method: r.method } },
        h("td", { text: r.run || "(top level)" }), h("td", { text: r.method + (r.state && r.state !== "complete" ? ` (${r.state})` : "") }), h("td", { class: "num", text: fmtNum(r.n) }),
        h("td", { class: "num", text: fmtNum(metricOf(r, "em")) }), h("td", { class: "num", text: fmtNum(metricOf(r, "f1")) }),
        h("td", { class: "num", text: fmtNum(cost.llm_calls_per_q, 1) }), h("td", { class: "num", text: fmtNum(cost.seconds_per_q, 1) }),
        h("td", null, open));
    }));
    const runs = [...new Set(runsState.list.map((r) => r.run))];
    $("#run-pick").replaceChildren(...runs.map((r) => h("option", { value: r, text: r || "(top level)" })));
  }

  function methodsOf(run) { return runsState.list.filter((r) => r.run === run).map((r) => r.method); }

  function fillMethodSelects(run, a, b) {
    const ms = methodsOf(run);
    $("#method-a").replaceChildren(...ms.map((m) => h("option", { value: m, text: m })));
    $("#method-b").replaceChildren(h("option", { value: "", text: "— none —" }), ...ms.map((m) => h("option", { value: m, text: m })));
    $("#method-a").value = a || ms[0] || "";
    $("#method-b").value = b || "";
  }

  async function fetchRecords(run, method) {
    const key = `${run}\u0000${method}`;
    if (runsState.cache.has(key)) return runsState.cache.get(key);
    const limit = 500;
    let offset = 0, summary = null;
    const records = [];
    for (let guard = 0; guard < 400; guard++) {
      const d = await api(runPath(run, method, { offset, limit }));
      summary = d.summary || summary;
      const batch = d.records || [];
      records.push(...batch);
      const total = d.total ?? d.matched ?? (summary && (summary.n ?? summary.done));
      if (batch.length < limit || (typeof total === "number" && records.length >= total)) break;
      offset += batch.length;
    }
    const out = { run, method, summary, records, byId: new Map(records.map((r) => [String(r.id), r])) };
    runsState.cache.set(key, out);
    return out;
  }

  async function openRun(run, a, b) {
    runsState.run = run;
    $("#run-pick").value = run;
    fillMethodSelects(run, a, b);
    show($("#run-form"), true);
    $("#runs-box").open = false;
    await loadSelection();
  }

  async function loadSelection() {
    const run = $("#run-pick").value, a = $("#method-a").value, b = $("#method-b").value;
    const status = $("#runs-status"), err = $("#runs-error");
    showError(err, "");
    show($("#compare"), false); // its traces were of the previous choice
    if (!a) return; // the run "" is a method directory right in the runs directory
    status.textContent = `Loading ${a}${b ? ` and ${b}` : ""}…`;
    try {
      const [ra, rb] = await Promise.all([fetchRecords(run, a), b ? fetchRecords(run, b) : Promise.resolve(null)]);
      runsState.a = ra;
      runsState.b = rb && rb.method !== ra.method ? rb : null;
      $("#filter-compare").disabled = !runsState.b;
      if (!runsState.b) $("#filter-compare").value = "all";
      fillMetricSelect();
      renderRecords();
      status.textContent = "";
    } catch (e) {
      status.textContent = "";
      showError(err, `Could not load the run: ${e.message}`);
    }
  }

  function fillMetricSelect() {
    const names = new Set();
    for (const r of runsState.a.records) for (const k of Object.keys(r.metrics || {})) names.add(k);
    const sel = $("#filter-metric");
    const prev = sel.value;
    const list = [...names];
    sel.replaceChildren(...list.map((n) => h("option", { value: n, text: n })));
    sel.value = list.includes(prev) ? prev : (list.includes("f1") ? "f1" : list.includes("em") ? "em" : list[0] || "");
  }

  // The same rules as the API's filters (hopqa.server.runs.Filters): failed = status not "ok";
  // wrong = failed, or an exact match (em) of 0 or none; right = the rest.
  function failed(r) { return !!r && r.status !== "ok"; }

  function right(r) {
    if (!r || failed(r)) return false;
    const em = (r.metrics || {}).em;
    return typeof em === "number" && em !== 0;
  }

  function rows() {
    const A = runsState.a, B = runsState.b;
    const metric = $("#filter-metric").value;
    const out = A.records.map((ra) => {
      const rb = B ? B.byId.get(String(ra.id)) || null : null;
      return { id: String(ra.id), question: ra.question || "", gold: goldText(ra.gold), a: ra, b: rb,
               a_pred: ra.prediction ?? "", b_pred: rb ? rb.prediction ?? "" : "",
               a_metric: metricOf(ra, metric), b_metric: rb ? metricOf(rb, metric) : undefined,
               a_status: failed(ra) ? "failed" : right(ra) ? "right" : "wrong",
               b_status: rb ? (failed(rb) ? "failed" : right(rb) ? "right" : "wrong") : "" };
    });
    const wrongOnly = $("#filter-wrong").checked, failedOnly = $("#filter-failed").checked;
    const cmp = B ? $("#filter-compare").value : "all";
    const text = $("#filter-text").value.trim().toLowerCase();
    const belowText = $("#filter-below").value.trim();
    const below = belowText === "" ? null : Number(belowText);
    const norm = (s) => String(s || "").trim().toLowerCase();
    const filtered = out.filter((r) => {
      if (wrongOnly && r.a_status === "right") return false; // wrong includes failed, as the API's wrong=true
      if (failedOnly && r.a_status !== "failed") return false;
      if (below !== null && Number.isFinite(below) && !(typeof r.a_metric === "number" && r.a_metric < below)) return false;
      if (cmp === "a-right-b-wrong" && !(r.a_status === "right" && r.b && r.b_status !== "right")) return false;
      if (cmp === "a-wrong-b-right" && !(r.a_status !== "right" && r.b && r.b_status === "right")) return false;
      if (cmp === "both-wrong" && !(r.a_status !== "right" && r.b && r.b_status !== "right")) return false;
      if (cmp === "differ" && !(r.b && norm(r.a_pred) !== norm(r.b_pred))) return false;
      if (text && ![r.id, r.question, r.gold, r.a_pred, r.b_pred].some((x) => String(x).toLowerCase().includes(text))) return false;
      return true;
    });
    const { key, dir } = runsState.sort;
    filtered.sort((x, y) => {
      const u = x[key], v = y[key];
      const ua = u === undefined || u === "", va = v === undefined || v === "";
      if (ua || va) return ua && va ? 0 : ua ? 1 : -1; // missing values last either way
      if (typeof u === "number" && typeof v === "number") return (u - v) * dir;
      return String(u).localeCompare(String(v), undefined, { numeric: true }) * dir;
    });
    return { all: out.length, rows: filtered };
  }

  function goldText(g) {
    if (Array.isArray(g)) return g.join(" | ");
    return g === null || g === undefined ? "" : String(g);
  }

  function renderRecords() {
    const A = runsState.a, B = runsState.b;
    if (!A) return;
    const metric = $("#filter-metric").value || "metric";
    const cols = [
      ["id", "id"], ["question", "Question"], ["gold", "Gold"],
      ["a_pred", `${A.method}: prediction`], ["a_metric", `${A.method}: ${metric}`], ["a_status", `${A.method}: status`],
      ...(B ? [["b_pred", `${B.method}: prediction`], ["b_metric", `${B.method}: ${metric}`], ["b_status", `${B.method}: status`]] : []),
    ];
    const table = $("#records");
    const { key, dir } = runsState.sort;
    table.tHead.replaceChildren(h("tr", null, cols.map(([k, label]) => {
      const b = h("button", { type: "button", class: "sort", dataset: { key: k } }, label,
        h("span", { class: "sort-mark", "aria-hidden": "true", text: key === k ? (dir > 0 ? " ▲" : " ▼") : "" }));
      b.addEventListener("click", () => {
        runsState.sort = { key: k, dir: runsState.sort.key === k ? -runsState.sort.dir : 1 };
        renderRecords();
        const again = table.tHead.querySelector(`button[data-key="${k}"]`);
        if (again) again.focus();
      });
      return h("th", { scope: "col", "aria-sort": key === k ? (dir > 0 ? "ascending" : "descending") : "none", dataset: { key: k } }, b);
    }), h("th", { scope: "col" }, h("span", { class: "sr-only", text: "Traces" }))));
    const { all, rows: list } = rows();
    table.tBodies[0].replaceChildren(...list.map((r) => {
      const open = h("button", { type: "button", class: "record-open", text: B ? "Compare" : "Trace", "aria-label": `open the trace${B ? "s" : ""} of ${r.id}` });
      open.addEventListener("click", () => openRecord(r.id));
      return h("tr", { class: "record", dataset: { id: r.id } },
        h("td", { class: "id", text: r.id }), h("td", { class: "q", text: r.question }), h("td", { class: "gold", text: r.gold }),
        h("td", { class: "pred", text: r.a_pred }), h("td", { class: "num", text: fmtNum(r.a_metric) }),
        h("td", null, badge(r.a_status, `status ${r.a_status}`)),
        B ? [h("td", { class: "pred", text: r.b ? r.b_pred : "(not in this run)" }), h("td", { class: "num", text: fmtNum(r.b_metric) }),
             h("td", null, r.b ? badge(r.b_status, `status ${r.b_status}`) : "")] : null,
        h("td", null, open));
    }));
    show(table, true);
    const s = A.summary || {};
    const mean = s.metrics && typeof s.metrics[metric] === "number" ? `; ${A.method} mean ${metric} ${fmtNum(s.metrics[metric])}` : "";
    const meanB = B && B.summary && B.summary.metrics && typeof B.summary.metrics[metric] === "number" ? `, ${B.method} ${fmtNum(B.summary.metrics[metric])}` : "";
    $("#records-summary").textContent = `${list.length} of ${plural(all, "question")} shown${mean}${meanB}.`;
  }

  async function openRecord(id) {
    const A = runsState.a, B = runsState.b;
    const panel = $("#compare"), body = $("#compare-body");
    const ra = A.byId.get(id);
    $("#compare-title").textContent = ra ? ra.question : id;
    body.replaceChildren();
    body.classList.toggle("two", !!B);
    show(panel, true);
    const sides = [A, B].filter(Boolean).map((R, i) => {
      const col = h("div", { class: `side side-${i ? "b" : "a"}` });
      const rec = R.byId.get(id);
      col.appendChild(h("h3", { class: "side-title" }, h("span", { class: "side-tag", text: i ? "B" : "A" }), " ", R.method));
      if (!rec) { col.appendChild(h("p", { class: "muted", text: "This method has no record of the question." })); body.appendChild(col); return null; }
      col.appendChild(h("p", { class: "muted", text: `id ${rec.id}` }));
      const tvBox = h("div", { class: "side-trace" });
      col.appendChild(tvBox);
      body.appendChild(col);
      const view = new TraceView(tvBox, { method: R.method, gold: Array.isArray(rec.gold) ? rec.gold : [goldText(rec.gold)] });
      view.setAnswer({ answer: rec.prediction, error: rec.error, usage: rec.usage, metrics: rec.metrics, method: R.method });
      return { R, view, rec };
    }).filter(Boolean);
    panel.focus();
    panel.scrollIntoView({ block: "start" });
    await Promise.all(sides.map(async ({ R, view, rec }) => {
      try {
        const d = await api(runPath(R.run, R.method, { id }));
        const full = d.record || d;
        view.setAnswer({ answer: full.prediction, error: full.error, usage: full.usage, metrics: full.metrics, method: R.method,
                         passages: full.passages, trace: full.trace });
        if (!full.trace) view.el.appendChild(h("p", { class: "muted", text: "This record has no trace." }));
      } catch (e) {
        view.el.appendChild(h("p", { class: "tv-error", role: "alert", text: `Could not load the trace: ${e.message}` }));
      }
    }));
  }

  function setupRuns() {
    $("#run-pick").addEventListener("change", () => { fillMethodSelects($("#run-pick").value); loadSelection(); });
    $("#method-a").addEventListener("change", loadSelection);
    $("#method-b").addEventListener("change", loadSelection);
    for (const id of ["filter-wrong", "filter-failed", "filter-compare", "filter-metric"]) $(`#${id}`).addEventListener("change", renderRecords);
    for (const id of ["filter-text", "filter-below"]) $(`#${id}`).addEventListener("input", renderRecords);
    $("#run-form").addEventListener("submit", (e) => e.preventDefault());
    $("#runs-reload").addEventListener("click", async () => {
      runsState.cache.clear();
      const keep = { run: $("#run-pick").value, a: $("#method-a").value, b: $("#method-b").value, shown: !$("#run-form").hidden };
      await loadRuns();
      if (keep.shown && runsState.list.some((r) => r.run === keep.run && r.method === keep.a)) {
        await openRun(keep.run, keep.a, methodsOf(keep.run).includes(keep.b) ? keep.b : "");
      }
    });
    $("#compare-close").addEventListener("click", () => { show($("#compare"), false); $("#records").scrollIntoView({ block: "start" }); });
  }

  // ---------------------------------------------------------------------------------------
  function init() {
    setupTabs();
    setupKey();
    setupAsk();
    setupRuns();
    $("#detail-close").addEventListener("click", closeDetail);
    $("#detail").addEventListener("click", (e) => { if (e.target === $("#detail")) closeDetail(); });
    const start = location.hash === "#runs" ? "runs" : "ask";
    selectTab(start);
    loadMethods();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
