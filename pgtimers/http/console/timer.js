// pgtimers console: a timer's page (#/timer/NAME?db=DB): its settings, next due times,
// charts, last runs and skips, audit rows, what it follows and what follows it, and keyed
// timers. One GET of /api/timers/NAME/history; keyed timers from GET /api/keyed?on=NAME.
"use strict";

const page = { name: "", db: "", window: "24h", data: null, keyed: [] };

function rowsText(n) {
  return n + (n === 1 ? " row" : " rows");
}

function runResult(r) {
  if (r.kind === "skipped") return ["skipped", "skipped"];
  if (r.ok === null) return ["—", "never"];
  return r.ok ? ["ok", "ok"] : ["failed", "failed"];
}

// An interval as PostgreSQL prints it ("00:01:30", "1 day 02:00:00") in words
// ("1 min 30 s"); any other form as it is.
function intervalText(text) {
  const m = /^(?:(\d+) days? ?)?(\d+):(\d\d):(\d\d(?:\.\d+)?)$/.exec(text || "");
  if (!m) return text;
  const parts = [[+(m[1] || 0), "d"], [+m[2], "h"], [+m[3], "min"], [+m[4], "s"]];
  return parts.filter(([n]) => n).map(([n, unit]) => n + " " + unit).join(" ") || "0 s";
}

// The run policies of issue 16, in words: retries, pause after, jitter, priority.
function renderPolicies(box, t, when) {
  definition(box, "Retries", t.retries
    ? `${t.retries} · the first after ${intervalText(t.retry_delay)}, doubling, at most 1 h`
    : "none: a failed run waits for its next due time").id = "timer-retries";
  definition(box, "Pause after", t.pause_after
    ? `${t.pause_after} failed due ${t.pause_after === 1 ? "time" : "times"} in a row`
    : "never");
  if (t.paused_ms) definition(box, "Paused", "since " + when(t.paused_ms) + ": turn it on to resume", "paused");
  definition(box, "Jitter", t.jitter ? "up to " + intervalText(t.jitter) + " after each due time" : "none");
  definition(box, "Priority", String(t.priority) + (t.priority ? "" : " (the default)")).id = "timer-priority";
  // issue 34: at most the group's max_running of its timers run at once
  if (t.run_group) {
    definition(box, "Run group", t.run_group + (t.waiting_for_group ? " · waiting: the group is full" : ""))
      .id = "timer-run-group";
  }
}

function definition(list, term, value, cls) {
  list.appendChild(el("dt", term));
  const dd = el("dd", value, cls);
  list.appendChild(dd);
  return dd;
}

function renderSettings(d) {
  const t = d.timer;
  const when = zonedFormat(d.zone, { dateStyle: "medium", timeStyle: "medium" });
  const box = $("#timer-settings");
  box.textContent = "";
  definition(box, "Schedule", t.schedule, "mono");
  definition(box, "Zone", d.zone);
  definition(box, "On", t.expired ? "expired" : t.enabled ? "on" : t.paused_ms ? "off: paused after failures" : "off");
  const sql = definition(box, "SQL", t.sql === null ? "hidden: only pgtimers_admin and the timer's owner see its SQL" : t.sql, t.sql === null ? "hidden" : "mono sql");
  sql.id = "timer-sql";
  definition(box, "Runs as", t.created_by);
  definition(box, "Autonomous", t.autonomous
    ? "yes: statement by statement, outside one transaction, in a session of its owner"
    : "no: one transaction").id = "timer-autonomous";
  definition(box, "Missed due times", t.catch_up);
  if (t.catch_up_window) {
    definition(box, "Catch-up window", "missed while no runner served: run late if less than "
      + intervalText(t.catch_up_window) + " old").id = "timer-catch-up-window";
  }
  if (t.deadline) {
    definition(box, "Deadline", "a successful commit within " + intervalText(t.deadline) + " of each due time · "
      + (t.deadline_missed ? t.deadline_missed + " missed, the last " + when(t.deadline_missed_ms) : "none missed"),
      t.deadline_missed ? "missed" : "").id = "timer-deadline";
  }
  if (t.history === "failures") {
    definition(box, "History", "failures only: a run that went well keeps no row, so the charts show failures and skips").id = "timer-history";
  }
  if (t.last_success_ms) definition(box, "Last success", when(t.last_success_ms)).id = "timer-last-success";
  if (t.start_at) definition(box, "Starts", when(Date.parse(t.start_at)));
  if (t.end_at) definition(box, "Ends", when(Date.parse(t.end_at)));
  if (t.max_runs) definition(box, "At most", t.max_runs + " runs");
  if (t.locked) definition(box, "Locked", "yes: a superuser must unlock it to change it");
  renderPolicies(box, t, when);
  definition(box, "Counts", `${t.runs} runs · ${t.failures} failed · ${t.skipped} skipped · ${t.failures_24h} failed in 24 h`);
  definition(box, "Saved", when(t.created_ms) + (t.updated_ms !== t.created_ms ? " · changed " + when(t.updated_ms) : ""));
}

function renderNext(d) {
  const list = $("#timer-next");
  list.textContent = "";
  $("#timer-zone").textContent = d.zone;
  const when = zonedFormat(d.zone, { weekday: "short", dateStyle: undefined, year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  if (!d.next_ms.length) list.appendChild(el("li", d.timer.enabled ? "no due times ahead" : "none: the timer is off", "muted"));
  for (const ms of d.next_ms) {
    const li = el("li", when(ms));
    li.appendChild(el("span", " · " + relative(ms, d.now_ms), "muted"));
    list.appendChild(li);
  }
}

function renderCharts(d) {
  const box = $("#timer-charts");
  box.textContent = "";
  const pts = d.points;
  const x1 = d.now_ms;
  const first = pts.length ? Math.min(...pts.map(pointTime)) : d.since_ms;
  // the window, or from the first run in it when that is later (so a young timer's
  // few minutes of runs are not a line at the right edge); at least a minute
  const x0 = Math.min(x1 - 60000, Math.max(d.since_ms, first - (x1 - first) * 0.02));
  const runs = pts.filter((p) => p[4] !== "skipped");
  const skips = pts.length - runs.length;
  const failed = runs.filter((p) => p[4] === "failed").length;
  const span = d.window === "7d" ? "7 days" : "24 hours";
  $("#timer-chart-summary").textContent = pts.length
    ? `${runs.length} runs (${failed} failed) and ${skips} skipped in the last ${span}` + (d.points_cut ? " (the newest 5000 shown)" : "")
    : `no runs in the last ${span}`;
  $("#timer-legend").hidden = !pts.length;
  if (d.timer.history === "failures") {
    // no row is kept of a run that went well: the points are failures, skips and retries
    box.appendChild(el("p", "This timer keeps failures only (history => 'failures'): runs that went well are counted, not drawn.", "hint")).id = "charts-failures-only";
  }
  if (!pts.length) return;
  box.appendChild(scatterChart("late", pts, x0, x1, d.zone, (p) => p[2], "lateness per run (start − due)"));
  box.appendChild(scatterChart("took", pts, x0, x1, d.zone, (p) => p[3], "duration per run"));
  // per hour: over the whole window, an hour a bar, the hour now in progress as wide as
  // the others (the axis goes on to its end)
  const hoursEnd = d.hours.length ? d.hours[d.hours.length - 1][0] + 3600000 : x1;
  box.appendChild(failuresChart(d.hours, d.since_ms, Math.max(x1, hoursEnd), d.zone));
}

function renderRuns(d) {
  const body = $("#timer-runs tbody");
  body.textContent = "";
  const when = zonedFormat(d.zone, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  $("#timer-runs-empty").hidden = d.runs.length > 0;
  for (const r of d.runs) {
    const tr = document.createElement("tr");
    const [text, cls] = runResult(r);
    tr.className = cls;
    // retries and backfills are marked: the kind as a tag, a backfill with its id
    const kind = el("td", null, "kind");
    kind.appendChild(el("span", r.kind.replace("_", " ") + (r.backfill ? " #" + r.backfill : ""), "tag " + r.kind));
    tr.appendChild(kind);
    tr.appendChild(el("td", r.kind === "skipped" ? "—" : String(r.attempt), "num attempt"));
    tr.appendChild(el("td", r.due_ms ? when(r.due_ms) : "—"));
    tr.appendChild(el("td", r.kind === "skipped" ? "—" : when(r.started_ms)));
    tr.appendChild(el("td", r.kind === "skipped" ? "—" : durationText(r.took_ms), "num"));
    tr.appendChild(el("td", r.kind === "skipped" ? "—" : durationText(r.late_ms), "num"));
    tr.appendChild(el("td", r.kind === "skipped" ? "—" : String(r.rows), "num"));
    tr.appendChild(el("td", text, "result " + cls));
    const why = el("td", r.kind === "skipped" ? r.reason : r.error, r.kind === "skipped" ? "reason" : "error");
    why.title = why.textContent;
    tr.appendChild(why);
    tr.appendChild(messagesCell(r.messages || ""));
    body.appendChild(tr);
  }
}

// What a run said (its NOTICE, INFO and WARNING messages, its error's DETAIL and HINT):
// a short one as it is, a longer one collapsed under its first line.
const MESSAGES_SHORT = 120;

function messagesCell(text) {
  const td = el("td", null, "messages");
  if (!text) return td;
  const lines = text.split("\n");
  if (lines.length === 1 && text.length <= MESSAGES_SHORT) {
    td.appendChild(el("pre", text));
    return td;
  }
  const box = el("details");
  const first = lines[0].length > MESSAGES_SHORT ? lines[0].slice(0, MESSAGES_SHORT) + "…" : lines[0];
  box.appendChild(el("summary", `${first} (${lines.length} ${lines.length === 1 ? "line" : "lines"})`));
  box.appendChild(el("pre", text));
  td.appendChild(box);
  return td;
}

function renderAudit(d) {
  const body = $("#timer-audit tbody");
  body.textContent = "";
  $("#timer-audit").hidden = d.audit === null;
  $("#timer-audit-none").textContent = d.audit === null
    ? "Its audit rows are shown to pgtimers_admin only."
    : d.audit.length ? "" : "No audit rows.";
  const when = zonedFormat(d.zone, { dateStyle: "medium", timeStyle: "medium" });
  for (const a of d.audit || []) {
    const tr = document.createElement("tr");
    tr.appendChild(el("td", when(a.at_ms)));
    tr.appendChild(el("td", a.action));
    tr.appendChild(el("td", a.actor + (a.session !== a.actor ? " (session " + a.session + ")" : "")));
    const detail = el("td", JSON.stringify(a.detail), "mono detail");
    detail.title = detail.textContent;
    tr.appendChild(detail);
    body.appendChild(tr);
  }
}

// What the timer waits for (schedule 'after') and what waits for it, each with its last result.
function renderFollows(d) {
  const links = d.follows || [];
  $("#timer-follows-box").hidden = links.length === 0;
  const list = $("#timer-follows");
  list.textContent = "";
  const when = zonedFormat(d.zone, { dateStyle: "medium", timeStyle: "medium" });
  for (const l of links) {
    const li = el("li", (l.relation === "follows" ? "follows " : "followed by ") + l.name + " · ");
    const [word, cls] = l.last_ok === null ? ["never ran", "never"] : l.last_ok ? ["ok", "ok"] : ["failed", "failed"];
    li.appendChild(el("span", word, "tag " + cls));
    if (l.last_due_ms) li.appendChild(el("span", " · due " + when(l.last_due_ms), "muted"));
    if (l.last_ok === false && l.last_error) li.appendChild(el("span", " · " + l.last_error, "muted"));
    list.appendChild(li);
  }
}

function renderKeyedOfTimer() {
  $("#timer-keyed-box").hidden = page.keyed.length === 0;
  const list = $("#timer-keyed");
  list.textContent = "";
  for (const k of page.keyed.slice(0, 50)) {
    const owed = k.owed_at ? " · owed " + keyedTime(k.owed_at, k.zone) : k.held_by ? " · held by " + k.held_by : "";
    list.appendChild(el("li", `${k.key} · ${k.status}${owed}`));
  }
}

function renderTimerPage() {
  const d = page.data;
  if (!d) return;
  $("#timer-title").textContent = d.timer.name;
  $("#timer-db").textContent = "database " + d.timer.database;
  for (const b of document.querySelectorAll("#timer-window button")) b.classList.toggle("on", b.dataset.window === page.window);
  renderSettings(d);
  renderNext(d);
  renderCharts(d);
  renderRuns(d);
  renderAudit(d);
  renderFollows(d);
  renderKeyedOfTimer();
}

async function loadTimerPage() {
  const base = "/api/timers/" + encodeURIComponent(page.name) + "/history?window=" + page.window;
  const q = page.db ? "&db=" + encodeURIComponent(page.db) : "";
  page.data = await api("GET", base + q);
  try {
    const keyed = "/api/keyed?on=" + encodeURIComponent(page.name) + q;
    page.keyed = await api("GET", keyed);
  } catch (e) {
    page.keyed = [];
  }
  renderTimerPage();
}

function openTimerPage(name, db) {
  if (page.name !== name || page.db !== db) page.data = null;
  page.name = name;
  page.db = db;
  $("#timer-title").textContent = name;
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#timer-window button")) {
    b.addEventListener("click", () => {
      page.window = b.dataset.window;
      loadTimerPage().catch((e) => say(e.message, "error"));
    });
  }
});
