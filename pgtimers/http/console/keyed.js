// pgtimers console: the keyed timers page (#/keyed), read-only like GET /api/keyed:
// per owner (the key's first part) its counts by status and its next owed timer, then
// every keyed timer in tick order.
"use strict";

const KEYED_STATUSES = ["armed", "held", "fired", "superseded", "void"];
const keyedPage = { status: "", on: "", rows: [] };

// A time of the API ("2026-12-03T08:06:19.076118+00:00") in the keyed timer's zone, the
// zone named: "3 Dec 2026, 08:06:19 UTC".
function keyedTime(iso, zone) {
  if (!iso) return "—";
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const format = zonedFormat(zone, { day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return format(ms) + " " + (zone || "UTC");
}

// An interval as PostgreSQL prints it ("00:00:00.003745", "54 days 10:30:00") as a
// duration ("4 ms", "54.4 d"); any other form as it is.
function keyedSpan(text) {
  const m = /^(?:(-?\d+) days? ?)?(-?)(\d+):(\d\d):(\d\d(?:\.\d+)?)$/.exec(text || "");
  if (!m) return text || "—";
  const sign = m[2] ? -1 : 1;
  const ms = +(m[1] || 0) * 86400000 + sign * (+m[3] * 3600000 + +m[4] * 60000 + +m[5] * 1000);
  return ms < 0 ? "−" + durationText(-ms) : durationText(ms);
}

// The same, into a cell as two pieces that each stay whole ("3 Dec 2026," and
// "08:06:19 UTC"), so a narrow column breaks between the date and the time.
function appendKeyedTime(cell, iso, zone, before) {
  const ms = Date.parse(iso || "");
  if (!iso || Number.isNaN(ms)) {
    cell.appendChild(document.createTextNode(iso ? (before || "") + iso : "—"));
    return cell;
  }
  const day = zonedFormat(zone, { day: "numeric", month: "short", year: "numeric" });
  const time = zonedFormat(zone, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  cell.appendChild(el("span", (before || "") + day(ms) + ",", "when"));
  cell.appendChild(document.createTextNode(" "));
  cell.appendChild(el("span", time(ms) + " " + (zone || "UTC"), "when"));
  return cell;
}

function keyedOwners(rows) {
  const owners = new Map();
  for (const k of rows) {
    const o = owners.get(k.on) || { on: k.on, counts: {}, next: null };
    o.counts[k.status] = (o.counts[k.status] || 0) + 1;
    // tick order: the first armed one is the next to fire
    if (!o.next && k.status === "armed") o.next = k;
    owners.set(k.on, o);
  }
  return [...owners.values()];
}

function renderKeyedPage() {
  const rows = keyedPage.rows;
  $("#keyed-empty").hidden = rows.length > 0;
  const owners = $("#keyed-owners tbody");
  owners.textContent = "";
  for (const o of keyedOwners(rows)) {
    const tr = document.createElement("tr");
    tr.appendChild(el("td", o.on, "mono"));
    for (const s of KEYED_STATUSES) tr.appendChild(el("td", o.counts[s] || "", "num"));
    const next = el("td", o.next ? o.next.key : "—", "mono");
    if (o.next) next.appendChild(el("span", " · owed " + keyedTime(o.next.owed_at, o.next.zone), "when"));
    tr.appendChild(next);
    owners.appendChild(tr);
  }
  const body = $("#keyed-list tbody");
  body.textContent = "";
  for (const k of rows) {
    const tr = document.createElement("tr");
    tr.className = k.status;
    tr.appendChild(el("td", k.key, "mono"));
    tr.appendChild(el("td", k.status, "status " + k.status));
    tr.appendChild(appendKeyedTime(el("td"), k.owed_at, k.zone));
    tr.appendChild(el("td", k.place, "num"));
    tr.appendChild(appendKeyedTime(el("td"), k.fired_at, k.zone));
    tr.appendChild(el("td", k.late_by ? keyedSpan(k.late_by) : "—", "num"));
    const held = el("td", k.held_by || "—");
    if (k.held_by) {
      held.appendChild(document.createTextNode(" "));
      appendKeyedTime(held, k.held_since, k.zone, "since ").classList.add("held");
    }
    tr.appendChild(held);
    tr.appendChild(el("td", k.owner));
    tr.appendChild(el("td", k.error || "", "error"));
    body.appendChild(tr);
  }
}

async function loadKeyedPage() {
  const params = new URLSearchParams();
  if (keyedPage.on) params.set("on", keyedPage.on);
  if (keyedPage.status) params.set("status", keyedPage.status);
  const q = params.toString();
  keyedPage.rows = await api("GET", withDb("/api/keyed" + (q ? "?" + q : "")));
  renderKeyedPage();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#keyed-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    keyedPage.on = field(event.target, "on").value.trim();
    keyedPage.status = field(event.target, "status").value;
    loadKeyedPage().catch((e) => say(e.message, "error"));
  });
});
