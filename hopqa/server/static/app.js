/* hopqa trace viewer: the page served at / by `hopqa serve`.
 *
 * Two views: Ask (POST /v1/answer, read the server-sent events, grow the trace live) and Runs
 * (GET /v1/runs, one run's questions, two methods side by side). Plain JS, no framework, no
 * network access beyond this server.
 *
 * Safety: everything that comes from the server (model output, passages, questions) is put in
 * the page as text: elements are built with createElement / textContent, never innerHTML.
 *
 * The page's entry point (an ES module, no build step): the tabs, the API key and start-up;
 * each view is a module of its own (ask.js, runs.js), the trace in trace.js, what they
 * share in common.js.
 */
import { $, apiKey, closeDetail, KEY_STORE, show } from "./common.js";
import { loadMethods, methodsLoaded, setupAsk } from "./ask.js";
import { loadRuns, runsState, setupRuns } from "./runs.js";

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
