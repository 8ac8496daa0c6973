// pgtimers console: the timer page's charts, drawn as plain SVG (no library: the
// console is three files its server ships, works offline, and needs dots, bars and
// axes only). Every text goes in with textContent.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART = { width: 760, height: 190, left: 58, right: 12, top: 12, bottom: 34 };

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// 1, 2, 5 times a power of ten: a round step for about `count` ticks up to `max`
function niceStep(max, count) {
  const raw = max / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function durationText(ms) {
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
  if (ms < 3600000) return (ms / 60000).toFixed(1) + " min";
  if (ms < 2 * 86400000) return (ms / 3600000).toFixed(1) + " h";
  return (ms / 86400000).toFixed(1) + " d";
}

// x: a time axis from x0 to x1 (ms); labels in the timer's zone
function timeTicks(x0, x1, zone) {
  const span = x1 - x0;
  // 4 to 8 labelled ticks: a span of 8 minutes gets one a minute, not one in all
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400];
  const step = 1000 * (steps.find((s) => (span / 1000) / s <= 8) || 86400);
  const short = span <= 2 * 86400000;
  // "08:06", "08:06:15"; over days "3 Dec" (a tick a day) or "3 Dec, 06:00"
  const opts = short
    ? { hour: "2-digit", minute: "2-digit", second: step < 60000 ? "2-digit" : undefined }
    : step >= 86400000
      ? { month: "short", day: "numeric" }
      : { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" };
  const format = zonedFormat(zone, opts);
  const ticks = [];
  for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) ticks.push([t, format(t)]);
  return ticks;
}

function zonedFormat(zone, opts) {
  let f;
  try {
    f = new Intl.DateTimeFormat("en-GB", { ...opts, timeZone: zone || "UTC", hourCycle: "h23" });
  } catch (e) {
    f = new Intl.DateTimeFormat("en-GB", { ...opts, timeZone: "UTC", hourCycle: "h23" });
  }
  return (ms) => f.format(new Date(ms));
}

function frame(label, x0, x1, yMax, yText, zone) {
  const c = CHART;
  const svg = svgEl("svg", {
    viewBox: `0 0 ${c.width} ${c.height}`,
    class: "chart",
    role: "img",
    "aria-label": label,
  });
  const plotW = c.width - c.left - c.right;
  const plotH = c.height - c.top - c.bottom;
  const sx = (x) => c.left + ((x - x0) / Math.max(1, x1 - x0)) * plotW;
  const sy = (y) => c.top + plotH - (y / yMax) * plotH;
  const step = niceStep(yMax, 4);
  for (let y = 0; y <= yMax + 1e-9; y += step) {
    svg.appendChild(svgEl("line", { x1: c.left, x2: c.width - c.right, y1: sy(y), y2: sy(y), class: "grid" }));
    svg.appendChild(svgEl("text", { x: c.left - 6, y: sy(y) + 4, class: "tick y" }, yText(y)));
  }
  for (const [t, text] of timeTicks(x0, x1, zone)) {
    svg.appendChild(svgEl("line", { x1: sx(t), x2: sx(t), y1: c.top, y2: c.top + plotH, class: "grid" }));
    svg.appendChild(svgEl("text", { x: sx(t), y: c.height - 16, class: "tick x" }, text));
  }
  svg.appendChild(svgEl("text", { x: c.left, y: c.height - 2, class: "axis-label" }, label));
  return { svg, sx, sy, plotH };
}

// Where a point goes on the time axis: a run when it started; a skipped due time at that
// due time (its row is written when the skip is seen, at once for every due time a downtime
// missed), so a gap shows its skips across it rather than piled up where it ended.
function pointTime(p) {
  return p[4] === "skipped" && p[1] ? p[1] : p[0];
}

// Runs as dots (y = value(point)), coloured by outcome; skips as grey marks on the
// x axis. points: [started_ms, due_ms, late_ms, took_ms, outcome, kind].
function scatterChart(kind, points, x0, x1, zone, value, label) {
  const runs = points.filter((p) => p[4] !== "skipped");
  const yMax = Math.max(10, ...runs.map(value)) * 1.1;
  const { svg, sx, sy, plotH } = frame(label, x0, x1, yMax, durationText, zone);
  svg.dataset.chart = kind;
  const when = zonedFormat(zone, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  for (const p of points) {
    const x = sx(Math.min(x1, Math.max(x0, pointTime(p))));
    if (p[4] === "skipped") {
      const y = CHART.top + plotH;
      const mark = svgEl("path", { d: `M${x - 3.5},${y + 7} L${x + 3.5},${y + 7} L${x},${y + 1} Z`, class: "pt skipped" });
      mark.appendChild(svgEl("title", {}, "skipped: due " + when(p[1])));
      svg.appendChild(mark);
      continue;
    }
    const cls = "pt " + p[4] + (p[5] === "scheduled" ? "" : " other");
    const dot = svgEl("circle", { cx: x, cy: sy(value(p)), r: 2.6, class: cls });
    const text = `${p[4]} · ${p[5]} · due ${when(p[1])} · ${durationText(p[2])} late · took ${durationText(p[3])}`;
    dot.appendChild(svgEl("title", {}, text));
    svg.appendChild(dot);
  }
  return svg;
}

// hours: [hour_ms, runs, failures, skips]: failures as red bars, skips stacked in grey
function failuresChart(hours, x0, x1, zone) {
  const yMax = Math.max(1, ...hours.map((h) => h[2] + h[3])) * 1.1;
  const { svg, sx, sy } = frame("failures and skips per hour", x0, x1, yMax, (y) => String(Math.round(y * 10) / 10), zone);
  svg.dataset.chart = "failures";
  const hourFormat = zonedFormat(zone, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  for (const [at, runs, failures, skips] of hours) {
    if (!failures && !skips) continue;
    const left = sx(Math.max(at, x0));
    const width = Math.max(2, sx(Math.min(at + 3600000, x1)) - left - 1);
    const title = `${hourFormat(at)}: ${failures} failed of ${runs} runs, ${skips} skipped`;
    for (const [from, to, cls] of [[0, failures, "bar failed"], [failures, failures + skips, "bar skipped"]]) {
      if (to <= from) continue;
      const rect = svgEl("rect", { x: left, y: sy(to), width, height: sy(from) - sy(to), class: cls });
      rect.appendChild(svgEl("title", {}, title));
      svg.appendChild(rect);
    }
  }
  return svg;
}
