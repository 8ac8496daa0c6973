// pgtimers console: plain JavaScript over the HTTP API, no build step.
// Every value from the server is shown with textContent, never as HTML.
"use strict";

const AUTH_KEY = "pgtimers.auth";
const state = {
  db: sessionStorage.getItem("pgtimers.db") || "",
  auth: sessionStorage.getItem(AUTH_KEY) || "",
  who: sessionStorage.getItem("pgtimers.who") || "",
  list: null, // {now_ms, timers} of the database shown
  listAt: 0, // Date.now() when it came
  stats: null,
  statsAt: 0,
  busy: new Set(), // timers with a Run now waiting
};

// `/?token=…`, the link pgtimers run prints: keep the token for this tab (session
// storage, which is this origin's alone: a cookie would go to every port of the host)
// and take it out of the address bar and the tab's history at once.
(function takeTokenFromAddress() {
  const params = new URLSearchParams(location.search);
  const token = params.get("token");
  if (token === null) return;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  if (!token) return;
  state.auth = "Bearer " + token;
  state.who = "token";
  sessionStorage.setItem(AUTH_KEY, state.auth);
  sessionStorage.setItem("pgtimers.who", state.who);
})();

const $ = (sel) => document.querySelector(sel);
// a form's own input by name (form.name would be the form's name attribute)
const field = (form, name) => form.elements.namedItem(name);

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function withDb(path) {
  if (!state.db) return path;
  return path + (path.includes("?") ? "&" : "?") + "db=" + encodeURIComponent(state.db);
}

async function api(method, path, body) {
  const headers = { "X-Pgtimers-Console": "1" };
  if (state.auth) headers["Authorization"] = state.auth;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  let data = null;
  try {
    data = await resp.json();
  } catch (e) {
    data = null;
  }
  if (resp.status === 401) {
    showSignin((data && data.error) || "sign in");
    throw new ApiError(401, (data && data.error) || "sign in");
  }
  if (!resp.ok) throw new ApiError(resp.status, (data && data.error) || resp.statusText);
  return data;
}

// ---- messages and times ---------------------------------------------------

function say(text, kind) {
  const box = $("#message");
  box.textContent = text;
  box.className = kind || "ok";
  box.hidden = false;
}

function span(seconds) {
  if (seconds < 60) return seconds + " s";
  if (seconds < 3600) return Math.round(seconds / 60) + " min";
  if (seconds < 2 * 86400) return Math.round(seconds / 3600) + " h";
  return Math.round(seconds / 86400) + " days";
}

function relative(ms, now) {
  const s = Math.round((now - ms) / 1000);
  if (Math.abs(s) < 1) return "now";
  return s > 0 ? span(s) + " ago" : "in " + span(-s);
}

function serverNow() {
  if (!state.list) return Date.now();
  return state.list.now_ms + (Date.now() - state.listAt);
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

// ---- the timers list --------------------------------------------------------

// A due time this far in the past with no run: overdue (as timers.trouble says).
const OVERDUE_MS = 60000;

function rowCount(n) {
  return n + (n === 1 ? " row" : " rows");
}

function overdueMs(t, now) {
  if (t.running || !t.enabled || t.expired || !t.next_run_ms) return 0;
  const late = now - t.next_run_ms;
  return late > OVERDUE_MS ? late : 0;
}

// Turned off by pause_after (failed due times in a row); turning it on resumes it.
function paused(t) {
  return !t.enabled && t.paused_ms > 0;
}

function nextRun(t, now) {
  if (t.running) return "running now";
  // due, and its run group's max_running timers are running (timers.set_group)
  if (t.waiting_for_group) return "waiting for group " + t.run_group;
  if (paused(t)) return "paused";
  if (!t.enabled) return "off";
  if (t.expired) return "expired";
  if (!t.next_run_ms) return "—";
  const overdue = overdueMs(t, now);
  if (overdue) return "overdue by " + span(Math.round(overdue / 1000));
  return relative(t.next_run_ms, now);
}

function result(t) {
  if (t.running) return ["running…", "running"];
  if (t.last_ok === null) return ["never ran", "never"];
  if (t.last_ok) return ["ok · " + rowCount(t.last_rows) + " · " + durationText(t.last_took_ms), "ok"];
  return ["failed", "failed"];
}

function timerHref(name, db) {
  return "#/timer/" + encodeURIComponent(name) + (db ? "?db=" + encodeURIComponent(db) : "");
}

function timerLink(name, db) {
  const a = el("a", name, "timer-link");
  a.href = timerHref(name, db);
  return a;
}

function renderList() {
  const body = $("#timers tbody");
  body.textContent = "";
  const timers = (state.list && state.list.timers) || [];
  $("#empty").hidden = timers.length > 0;
  const now = serverNow();
  for (const t of timers) {
    const tr = document.createElement("tr");
    tr.dataset.name = t.name;
    const name = el("td", null, "name");
    name.appendChild(timerLink(t.name, state.db));
    if (t.run_group) {
      // its run group: at most the group's max_running of its timers run at once
      const group = el("span", "group " + t.run_group, "badge group");
      group.title = "run group " + t.run_group + " (timers.set_group sets how many of its timers run at once)";
      name.appendChild(group);
    }
    tr.appendChild(name);
    tr.appendChild(el("td", t.schedule, "schedule"));
    tr.appendChild(el("td", nextRun(t, now), "next"));
    tr.appendChild(el("td", t.last_run_ms ? relative(t.last_run_ms, now) : "never", "last"));
    const [text, cls] = result(t);
    tr.appendChild(el("td", text, "result " + cls));
    const err = el("td", t.last_error, "error");
    err.title = t.last_error;
    tr.appendChild(err);
    const on = document.createElement("td");
    const sw = document.createElement("input");
    sw.type = "checkbox";
    sw.className = "switch";
    sw.checked = t.enabled;
    sw.setAttribute("aria-label", "on/off " + t.name);
    sw.addEventListener("change", () => setEnabled(t.name, sw.checked, sw));
    on.appendChild(sw);
    if (paused(t)) {
      const badge = el("span", "paused", "badge paused");
      badge.title = "turned off after " + t.pause_after + " failed due times in a row (pause after); turn it on to resume";
      on.appendChild(badge);
    }
    tr.appendChild(on);
    const actions = document.createElement("td");
    const run = el("button", state.busy.has(t.name) ? "Running…" : "Run now", "run");
    run.type = "button";
    run.disabled = state.busy.has(t.name);
    run.addEventListener("click", () => runNow(t.name));
    const del = el("button", "Delete", "delete");
    del.type = "button";
    del.addEventListener("click", () => remove(t.name));
    actions.append(run, del);
    tr.appendChild(actions);
    body.appendChild(tr);
  }
}

async function loadList() {
  state.list = await api("GET", withDb("/api/timers"));
  state.listAt = Date.now();
  // Export is for those who may export (pgtimers_admin), as in SQL
  $("#export").hidden = !state.list.may_export;
  renderList();
}

async function runNow(name) {
  state.busy.add(name);
  renderList();
  try {
    const r = await api("POST", withDb("/api/timers/" + encodeURIComponent(name) + "/run"));
    if (!r.finished) say("timer " + name + " is still running; its result will show in the list", "ok");
    else if (r.ok) say("timer " + name + " ran: ok, " + rowCount(r.rows) + " in " + r.took_ms + " ms", "ok");
    else say("timer " + name + " failed: " + r.error, "error");
  } catch (e) {
    say(e.message, "error");
  } finally {
    state.busy.delete(name);
  }
  await refresh();
}

async function setEnabled(name, enabled, input) {
  input.disabled = true;
  try {
    const path = withDb("/api/timers/" + encodeURIComponent(name) + "/enable");
    await api("POST", path, { enabled });
    say("timer " + name + " is " + (enabled ? "on" : "off"), "ok");
  } catch (e) {
    say(e.message, "error");
  }
  await refresh();
}

async function remove(name) {
  if (!window.confirm("Delete timer " + name + "?")) return;
  try {
    await api("POST", withDb("/api/timers/" + encodeURIComponent(name) + "/delete"));
    say("timer " + name + " deleted", "ok");
  } catch (e) {
    say(e.message, "error");
  }
  await refresh();
}

// ---- the Monitor -------------------------------------------------------------

// Why a timer is overdue, as far as the Monitor can tell: whether a runner serves its
// database (a runner that is up but has every worker busy leaves due times waiting too).
function overdueText(overdue, runners, db) {
  const late = "overdue by " + span(Math.round(overdue / 1000));
  if (runners === 0) return late + ": no runner serves " + db;
  if (runners > 0) return late + ", with a runner up: its workers may all be busy";
  return late + ": is a runner up?";
}

// The server's reasons (timers.trouble), but its "overdue by …" (said as of the read, and
// also of a timer that is running now) said again as of now: never for a running timer.
function troubleText(t, now, runners) {
  const parts = (t.trouble || "").split("; ").filter((p) => p);
  let at = parts.findIndex((p) => p.startsWith("overdue by "));
  if (at >= 0) parts.splice(at, 1);
  else at = parts.findIndex((p) => p.startsWith("last run started") || p.startsWith("skipped: "));
  const overdue = overdueMs(t, now);
  if (overdue) parts.splice(at >= 0 ? at : parts.length, 0, overdueText(overdue, runners, t.database));
  return parts.join("; ");
}

function renderMonitor() {
  const list = $("#monitor-timers");
  list.textContent = "";
  if (!state.stats) return;
  const now = state.stats.now_ms + (Date.now() - state.statsAt);
  const runners = new Map(state.stats.databases.map((d) => [d.name, d.runners]));
  for (const t of state.stats.timers) {
    // overdue now, though the Monitor's last read did not say so yet
    const overdue = overdueMs(t, now);
    const trouble = troubleText(t, now, runners.get(t.database));
    const never = t.last_ok === null;
    const li = el("li", null, trouble ? "trouble" : never ? "never" : "fine");
    li.dataset.name = t.name;
    const head = el("div", null, "head");
    const b = el("b");
    b.appendChild(timerLink(t.name, t.database));
    head.append(b, el("span", " · " + t.database, "dbname"));
    li.appendChild(head);
    li.appendChild(el("div", trouble || (t.running ? "running" : never ? "never ran" : "ok"), "why"));
    const facts = never
      ? [t.running ? "its first run is running now" : overdue ? "due " + span(Math.round(overdue / 1000)) + " ago, not run" : "next " + nextRun(t, now)]
      : [
          "last ran " + relative(t.last_run_ms, now),
          t.last_ok === false ? "failed" : "ok · " + rowCount(t.last_rows),
          "started " + durationText(t.last_late_ms) + " late",
          t.failures_24h + " failed in 24 h",
        ];
    if (overdue && !never) facts.unshift("overdue by " + span(Math.round(overdue / 1000)));
    li.appendChild(el("div", facts.join(" · "), "facts"));
    if (t.last_error) li.appendChild(el("div", t.last_error, "error"));
    list.appendChild(li);
  }
  const dbs = state.stats.databases
    .map((d) => d.name + (d.readable ? (d.runners ? "" : " (no runner)") : " (not readable)"))
    .join(", ");
  $("#monitor-dbs").textContent = "Databases: " + dbs;
  renderUndeliverable(state.stats.undeliverable || []);
}

// Webhook deliveries given up: the event, the timer, where to, and the last error.
function renderUndeliverable(rows) {
  const list = $("#undeliverable");
  list.textContent = "";
  $("#monitor-undeliverable").hidden = rows.length === 0;
  for (const d of rows) {
    const li = el("li");
    const head = el("div", null, "head");
    const b = el("b");
    b.appendChild(timerLink(d.timer, d.database));
    head.append(el("span", d.event + " of "), b, el("span", " · " + d.database, "dbname"));
    li.appendChild(head);
    li.appendChild(el("div", "to " + d.target + " · " + d.attempts + " attempts", "facts"));
    if (d.last_error) li.appendChild(el("div", d.last_error, "error"));
    list.appendChild(li);
  }
}

function renderDatabases() {
  const select = $("#db");
  const names = state.stats.databases.filter((d) => d.readable).map((d) => d.name);
  if (state.db && !names.includes(state.db)) state.db = "";
  const current = state.db || names[0] || "";
  if ([...select.options].map((o) => o.value).join() !== names.join()) {
    select.textContent = "";
    for (const n of names) select.appendChild(el("option", n));
  }
  select.value = current;
}

async function loadStats() {
  state.stats = await api("GET", "/api/stats");
  state.statsAt = Date.now();
  renderDatabases();
  renderMonitor();
}

// ---- forms -----------------------------------------------------------------

// The New timer form's fields are named as the keys of a timer (pgtimers/options.py;
// tests/unit/test_options.py checks them): a box is true or false, a number field a
// number, the SQL as typed, any other text trimmed; an empty field that is not required
// is left out, so the option takes its default. What a value may be, the server says.
function timerBody(form) {
  const body = {};
  for (const input of form.elements) {
    if (!input.name) continue;
    if (input.type === "checkbox") {
      body[input.name] = input.checked;
      continue;
    }
    const text = input.tagName === "TEXTAREA" ? input.value : input.value.trim();
    if (!text && !input.required) continue;
    body[input.name] = input.type === "number" ? Number(text) : text;
  }
  return body;
}

async function saveTimer(event) {
  event.preventDefault();
  const f = event.target;
  const body = timerBody(f);
  try {
    const t = await api("POST", withDb("/api/timers"), body);
    say("timer " + t.name + " saved; next run " + nextRun(t, serverNow()), "ok");
    f.reset();
    $("#new-timer").hidden = true;
  } catch (e) {
    say(e.message, "error");
  }
  await refresh();
}

async function openKeep() {
  $("#keep").hidden = false;
  const box = $("#keep-tables");
  box.querySelectorAll("label, p").forEach((n) => n.remove());
  try {
    const { tables } = await api("GET", withDb("/api/tables"));
    if (!tables.length) box.appendChild(el("p", "No range-partitioned tables in this database."));
    for (const t of tables) {
      const label = el("label", null, "check");
      const box1 = document.createElement("input");
      box1.type = "checkbox";
      box1.name = "table";
      box1.value = t.table;
      box1.disabled = !t.may_keep;
      label.append(box1, " " + t.table + " — " + t.key + ", " + t.partitions + " partitions");
      if (!t.may_keep) label.title = "only its owner " + t.owner + " may drop its partitions";
      box.appendChild(label);
    }
  } catch (e) {
    say(e.message, "error");
  }
}

async function saveKeep(event) {
  event.preventDefault();
  const f = event.target;
  const tables = [...f.querySelectorAll("input[name=table]:checked")].map((i) => i.value);
  if (!tables.length) return say("pick at least one table", "error");
  try {
    const body = { tables, keep: field(f, "keep").value, schedule: field(f, "schedule").value };
    const r = await api("POST", withDb("/api/keep"), body);
    say("saved " + r.timers.map((t) => t.name).join(", "), "ok");
    $("#keep").hidden = true;
  } catch (e) {
    say(e.message, "error");
  }
  await refresh();
}

// ---- sign in -----------------------------------------------------------------

function showSignin(why) {
  $("#signin").hidden = false;
  for (const id of ["#list", "#timer-page", "#keyed-page"]) $(id).hidden = true;
  if (why && why !== "sign in") say(why, "error");
}

function signIn(event) {
  event.preventDefault();
  const f = event.target;
  const token = field(f, "token").value;
  const role = field(f, "role").value;
  if (token) {
    state.auth = "Bearer " + token;
    state.who = "token";
  } else {
    const bytes = new TextEncoder().encode(role + ":" + field(f, "password").value);
    state.auth = "Basic " + btoa(String.fromCharCode(...bytes));
    state.who = role;
  }
  sessionStorage.setItem(AUTH_KEY, state.auth);
  sessionStorage.setItem("pgtimers.who", state.who);
  f.reset();
  $("#signin").hidden = true;
  $("#message").hidden = true;
  showView();
  refresh();
}

function signOut() {
  state.auth = state.who = "";
  sessionStorage.removeItem(AUTH_KEY);
  sessionStorage.removeItem("pgtimers.who");
  state.list = state.stats = null;
  renderList();
  renderMonitor();
  showSignin();
}

// ---- pages: #/ (the list), #/timer/NAME?db=DB, #/keyed ------------------------

function currentView() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#/timer/")) {
    const [path, query] = hash.slice("#/timer/".length).split("?");
    const db = new URLSearchParams(query || "").get("db") || "";
    return { view: "timer", name: decodeURIComponent(path), db };
  }
  if (hash.startsWith("#/keyed")) return { view: "keyed" };
  return { view: "list" };
}

function showView() {
  const v = currentView();
  $("#list").hidden = v.view !== "list" || !$("#signin").hidden;
  $("#timer-page").hidden = v.view !== "timer";
  $("#keyed-page").hidden = v.view !== "keyed";
  if (v.view !== "list") $("#new-timer").hidden = $("#keep").hidden = true;
  if (v.view === "timer") openTimerPage(v.name, v.db || state.db);
  return v;
}

// ---- wiring ------------------------------------------------------------------

async function refresh() {
  try {
    await loadStats();
    state.db = $("#db").value || state.db;
    const v = showView();
    if (v.view === "timer") await loadTimerPage();
    else if (v.view === "keyed") await loadKeyedPage();
    else await loadList();
    $("#who").textContent = state.who ? "as " + state.who : "";
    $("#signout").hidden = !state.auth;
  } catch (e) {
    if (e.status !== 401) say(e.message, "error");
  }
}

// Every second: only the relative times move (the rows stay, so clicks land).
function tick() {
  if (!state.list) return;
  const now = serverNow();
  const byName = new Map(state.list.timers.map((t) => [t.name, t]));
  for (const tr of document.querySelectorAll("#timers tbody tr")) {
    const t = byName.get(tr.dataset.name);
    if (!t) continue;
    tr.querySelector(".next").textContent = nextRun(t, now);
    tr.querySelector(".last").textContent = t.last_run_ms ? relative(t.last_run_ms, now) : "never";
  }
  renderMonitor();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#new-timer-open").addEventListener("click", () => {
    if (currentView().view !== "list") location.hash = "#/";
    $("#new-timer").hidden = false;
    field($("#new-timer-form"), "name").focus();
  });
  $("#new-timer-cancel").addEventListener("click", () => ($("#new-timer").hidden = true));
  $("#new-timer-form").addEventListener("submit", saveTimer);
  $("#keep-open").addEventListener("click", () => {
    if (currentView().view !== "list") location.hash = "#/";
    openKeep();
  });
  $("#keep-cancel").addEventListener("click", () => ($("#keep").hidden = true));
  $("#keep-form").addEventListener("submit", saveKeep);
  $("#signin-form").addEventListener("submit", signIn);
  $("#signout").addEventListener("click", signOut);
  $("#db").addEventListener("change", () => {
    state.db = $("#db").value;
    sessionStorage.setItem("pgtimers.db", state.db);
    refresh();
  });
  window.addEventListener("hashchange", () => {
    $("#message").hidden = true;
    window.scrollTo(0, 0);
    refresh();
  });
  refresh();
  setInterval(refresh, 5000);
  setInterval(tick, 1000);
});
