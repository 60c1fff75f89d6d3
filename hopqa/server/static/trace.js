/* hopqa trace viewer: The trace: its model (steps by id, built from live events or a finished trace, their
 * costs) and its view (answer, cost, each method's reasoning: HGOT's plan graph, Tree of
 * Reviews' tree, ...; the step tree, the passages).
 */
import { asText, badge, fmtNum, fmtSec, h, plural, short, showLlmCall, showPassage, svg, textBlock } from "./common.js";

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

export class TraceView {
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
