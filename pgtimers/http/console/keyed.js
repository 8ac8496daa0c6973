// pgtimers console: the keyed timers page (#/keyed), read-only like GET /api/keyed:
// per owner (the key's first part) its counts by status and its next owed timer, then
// every keyed timer in tick order.
"use strict";

const KEYED_STATUSES = ["armed", "held", "fired", "superseded", "void"];
const keyedPage = { status: "", on: "", rows: [] };

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
    tr.appendChild(el("td", o.next ? o.next.key + " · owed " + o.next.owed_at : "—", "mono"));
    owners.appendChild(tr);
  }
  const body = $("#keyed-list tbody");
  body.textContent = "";
  for (const k of rows) {
    const tr = document.createElement("tr");
    tr.className = k.status;
    tr.appendChild(el("td", k.key, "mono"));
    tr.appendChild(el("td", k.status, "status " + k.status));
    tr.appendChild(el("td", k.owed_at));
    tr.appendChild(el("td", k.place, "num"));
    tr.appendChild(el("td", k.fired_at || "—"));
    tr.appendChild(el("td", k.late_by || "—"));
    tr.appendChild(el("td", k.held_by ? k.held_by + " since " + k.held_since : "—"));
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
