// pgtimers console: Export. GET /api/export (timers.export: the timers and calendars as a
// declared set) written as the TOML file `pgtimers apply` reads, and downloaded as
// pgtimers-<database>.toml. Read-only: it changes nothing.
"use strict";

// A timer's keys in this order first (the rest by name), so a file reads like a save.
const TOML_FIRST = ["name", "schedule", "sql", "from_day", "day", "week"];

function tomlKey(key) {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key);
}

// A control character (other than those with a short escape) as \uXXXX.
function tomlControl(ch) {
  return "\\u" + ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
}

// A string as a TOML basic string, or a multi-line one when it has line breaks (SQL):
// backslashes and quotes escaped, control characters as \uXXXX.
function tomlString(s) {
  if (s.includes("\n")) {
    const body = s
      .replace(/\\/g, "\\\\")
      .replace(/"/g, '\\"')
      .replace(/\r/g, "\\r")
      .replace(/[\u0000-\u0008\u000B-\u001F\u007F]/g, tomlControl);
    return '"""\n' + body + '"""';
  }
  const short = { "\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\f": "\\f", "\r": "\\r" };
  return '"' + s.replace(/[\\"\u0000-\u001F\u007F]/g, (ch) => short[ch] || tomlControl(ch)) + '"';
}

function tomlValue(v) {
  if (typeof v === "string") return tomlString(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new Error("not a TOML number: " + v);
    return String(v); // an integer as it is; a fraction too ("0.5", "1e+21" are TOML)
  }
  if (Array.isArray(v)) return "[" + v.map(tomlValue).join(", ") + "]";
  throw new Error("no TOML for " + JSON.stringify(v));
}

function tomlKeys(obj) {
  const keys = Object.keys(obj).filter((k) => obj[k] !== null && obj[k] !== undefined);
  const rank = (k) => (TOML_FIRST.includes(k) ? TOML_FIRST.indexOf(k) : TOML_FIRST.length);
  return keys.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

// An array whose items are all objects is an array of tables.
function tablesOf(v) {
  return Array.isArray(v) && v.length > 0 && v.every((x) => x && typeof x === "object" && !Array.isArray(x));
}

// One [[path]] table: its plain keys, then its own arrays of tables ([[path.key]]).
function tomlTable(path, obj, lines) {
  lines.push("", "[[" + path + "]]");
  const keys = tomlKeys(obj);
  for (const k of keys) if (!tablesOf(obj[k])) lines.push(tomlKey(k) + " = " + tomlValue(obj[k]));
  for (const k of keys) if (tablesOf(obj[k])) for (const t of obj[k]) tomlTable(path + "." + tomlKey(k), t, lines);
}

// A declared set ({"managed_by", "calendar": [...], "timer": [...]}) as a TOML file:
// calendars first, as timers may trade on them.
function toToml(spec, header) {
  const lines = header.map((h) => "# " + h);
  if (spec.managed_by) lines.push("managed_by = " + tomlString(spec.managed_by));
  for (const c of spec.calendar || []) tomlTable("calendar", c, lines);
  for (const t of spec.timer || []) tomlTable("timer", t, lines);
  return lines.join("\n") + "\n";
}

async function exportTimers() {
  const database = $("#db").value || state.db || "default";
  try {
    const spec = await api("GET", withDb("/api/export"));
    const header = [
      "pgtimers: the timers of database " + database + ", exported " + new Date().toISOString(),
      "pgtimers apply --dsn ... pgtimers-" + database + ".toml makes a database's timers these",
    ];
    const blob = new Blob([toToml(spec, header)], { type: "application/toml" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "pgtimers-" + database.replace(/[^A-Za-z0-9_.-]/g, "_") + ".toml";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    const count = (n, word) => n + " " + word + (n === 1 ? "" : "s");
    const what = count((spec.timer || []).length, "timer") + " and " + count((spec.calendar || []).length, "calendar");
    say("exported " + what + " to " + link.download, "ok");
  } catch (e) {
    say(e.message, "error");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#export").addEventListener("click", exportTimers);
});
