/* hopqa trace viewer: The Runs view: GET /v1/runs, one run's questions, two methods side by side.
 */
import { $, api, badge, fmtNum, h, plural, show } from "./common.js";
import { TraceView } from "./trace.js";
import { showError } from "./ask.js";

// ---------------------------------------------------------------------------------------
// Runs view
// ---------------------------------------------------------------------------------------
export const runsState = { loaded: false, error: false, list: [], run: "", a: null, b: null, sort: { key: "id", dir: 1 }, cache: new Map() };

function runPath(run, method, params) {
  const q = params ? new URLSearchParams(params).toString() : "";
  // a run may contain '/' (kept as path separators); "" is a method directory right in the runs directory
  const prefix = run ? `${String(run).split("/").map(encodeURIComponent).join("/")}/` : "";
  return `v1/runs/${prefix}${encodeURIComponent(method)}${q ? "?" + q : ""}`;
}

export async function loadRuns() {
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

export function setupRuns() {
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
