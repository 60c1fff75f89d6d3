/* hopqa trace viewer: The Ask view: the methods and their options, POST /v1/answer, the trace growing live.
 */
import { $, api, formatDetail, h, show, sseEvents } from "./common.js";
import { TraceView } from "./trace.js";

// Ask view
// ---------------------------------------------------------------------------------------
let methods = [];
export let methodsLoaded = false;
let running = null; // AbortController of the question being answered

export function showError(box, message) {
  box.replaceChildren(h("strong", { text: "Error" }), " ", h("span", { class: "error-text", text: message }));
  show(box, !!message);
}

export async function loadMethods() {
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

export function setupAsk() {
  $("#ask-form").addEventListener("submit", ask);
  $("#method").addEventListener("change", methodChanged);
  $("#ask-stop").addEventListener("click", () => { if (running) running.abort(); });
  $("#options-reset").addEventListener("click", () => { const m = currentMethod(); if (m) renderOptions(m); });
  $("#question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("#ask-form").requestSubmit(); }
  });
}
