/**
 * The dashboard page (`GET /dashboard`): one static HTML document with its CSS and JS inline and its
 * charts drawn as SVG by hand — no framework, nothing loaded from another origin (the route's CSP
 * allows nothing else). It opens `/dashboard/events` (EventSource, which reconnects by itself) and
 * redraws from each `snapshot` event. Every value from the server goes in through `textContent` or an
 * SVG attribute, never as markup: model names and reasons are data, not HTML.
 */
export const DASHBOARD_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchyard router</title>
<style>
  :root { --fg: #1d2330; --muted: #6b7385; --line: #dde1e8; --bg: #f6f7f9; --card: #fff; --a: #2f6fdb; --b: #d9822b; --ok: #1e8e3e; --bad: #c5221f; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; gap: 16px; align-items: baseline; padding: 10px 16px; background: var(--card); border-bottom: 1px solid var(--line); }
  header h1 { font-size: 16px; margin: 0; }
  header .meta { color: var(--muted); }
  #status { margin-left: auto; font-weight: 600; }
  #status.live { color: var(--ok); } #status.down { color: var(--bad); }
  main { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; padding: 12px 16px; }
  section { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; min-width: 0; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 13px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
  table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--line); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 260px; }
  th { color: var(--muted); font-weight: 600; }
  td.num, th.num { text-align: right; }
  .pool { font-weight: 600; background: #eef2f8; }
  .empty { color: var(--muted); font-style: italic; }
  .bar { display: inline-block; width: 60px; height: 8px; background: var(--line); border-radius: 4px; vertical-align: middle; margin-right: 4px; }
  .bar > i { display: block; height: 100%; background: var(--a); border-radius: 4px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 12px; }
  .chart h3 { font-size: 12px; margin: 0 0 2px; font-weight: 600; }
  .chart svg { width: 100%; height: 120px; display: block; }
  .legend { color: var(--muted); font-size: 11px; }
  .legend b.a { color: var(--a); } .legend b.b { color: var(--b); }
  .split { display: flex; height: 14px; border-radius: 4px; overflow: hidden; background: var(--line); margin: 2px 0 6px; }
  .split i { display: block; height: 100%; }
</style>
</head>
<body>
<header>
  <h1>Switchyard router</h1>
  <span class="meta" id="meta"></span>
  <span id="status" class="down">connecting…</span>
</header>
<main>
  <section class="wide" id="workers-section">
    <h2>Workers</h2>
    <table id="workers"><thead><tr><th>pool / role</th><th>model</th><th>instance</th><th class="num">running</th><th class="num">waiting</th><th>KV usage</th><th class="num">prefix hit rate</th><th class="num">decisions</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="wide">
    <h2>Requests (last minutes)</h2>
    <div class="charts">
      <div class="chart"><h3>request rate <span class="legend">(req/s)</span></h3><svg id="chart-rate" viewBox="0 0 300 120" preserveAspectRatio="none"></svg></div>
      <div class="chart"><h3>TTFT <span class="legend">ms, <b class="a">p50</b> <b class="b">p90</b></span></h3><svg id="chart-ttft" viewBox="0 0 300 120" preserveAspectRatio="none"></svg></div>
      <div class="chart"><h3>ITL <span class="legend">ms, <b class="a">p50</b> <b class="b">p90</b></span></h3><svg id="chart-itl" viewBox="0 0 300 120" preserveAspectRatio="none"></svg></div>
    </div>
  </section>
  <section class="wide">
    <h2>Recent routing decisions <span class="legend" id="decisions-total"></span></h2>
    <table id="decisions"><thead><tr><th>time</th><th>model</th><th>pool</th><th>mode</th><th>worker</th><th class="num">prompt tokens</th><th class="num">overlap blocks</th><th class="num">cost</th><th class="num">candidates</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Disaggregation (prefill)</h2>
    <div id="disagg"></div>
  </section>
  <section>
    <h2>Planner decisions</h2>
    <table id="planner"><thead><tr><th>time</th><th>model</th><th>pool</th><th class="num">from → to</th><th>reason</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Workers joining and leaving</h2>
    <table id="worker-events"><thead><tr><th>time</th><th>event</th><th>model</th><th>instance</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; }
function row(cells, attrs) {
  const tr = document.createElement("tr");
  for (const c of cells) { if (c instanceof Node) { const td = el("td"); td.appendChild(c); tr.appendChild(td); } else tr.appendChild(typeof c === "object" && c !== null ? el("td", c.text, c.cls) : el("td", c)); }
  for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, String(v));
  return tr;
}
function fill(tbody, rows, cols, emptyText) {
  tbody.replaceChildren(...rows);
  if (rows.length === 0) { const tr = document.createElement("tr"); const td = el("td", emptyText, "empty"); td.colSpan = cols; tr.appendChild(td); tbody.appendChild(tr); }
}
const time = (ts) => new Date(ts).toLocaleTimeString();
const num = (v, d) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
const pct = (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(0) + "%");
function bar(v) { const b = el("span", undefined, "bar"); const i = document.createElement("i"); i.style.width = Math.max(0, Math.min(1, v)) * 100 + "%"; b.appendChild(i); const s = document.createElement("span"); s.appendChild(b); s.appendChild(document.createTextNode(pct(v))); return s; }
const POOLS = { prefill: "prefill", decode: "decode", aggregated: "aggregated", tensor: "tensor" };

function drawChart(svg, points, series) {
  const W = 300, H = 120, L = 34, B = 14, T = 6;
  let max = 0;
  for (const p of points) for (const s of series) { const v = p[s.key]; if (v !== null && v > max) max = v; }
  max = max > 0 ? max * 1.1 : 1;
  const n = points.length;
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - 4)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const kids = [];
  const line = (x1, y1, x2, y2, stroke) => { const l = document.createElementNS(SVG, "line"); l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2); l.setAttribute("stroke", stroke); l.setAttribute("stroke-width", "0.5"); return l; };
  const text = (tx, ty, s, anchor) => { const t = document.createElementNS(SVG, "text"); t.setAttribute("x", tx); t.setAttribute("y", ty); t.setAttribute("font-size", "8"); t.setAttribute("fill", "#6b7385"); t.setAttribute("text-anchor", anchor); t.textContent = s; return t; };
  for (const f of [0, 0.5, 1]) { kids.push(line(L, y(max * f), W - 4, y(max * f), "#dde1e8")); kids.push(text(L - 3, y(max * f) + 3, (max * f).toFixed(max * f >= 10 ? 0 : 1), "end")); }
  if (n > 0) { kids.push(text(L, H - 2, time(points[0].t), "start")); kids.push(text(W - 4, H - 2, time(points[n - 1].t), "end")); }
  for (const s of series) {
    let d = "";
    let pen = false;
    points.forEach((p, i) => { const v = p[s.key]; if (v === null) { pen = false; return; } d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1); pen = true; });
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d || "M0 0");
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", s.color);
    path.setAttribute("stroke-width", "1.5");
    path.setAttribute("vector-effect", "non-scaling-stroke");
    path.setAttribute("data-series", s.key);
    kids.push(path);
    // a point with no neighbour draws no line: mark it
    points.forEach((p, i) => {
      const v = p[s.key];
      const alone = v !== null && (i === 0 || points[i - 1][s.key] === null) && (i === n - 1 || points[i + 1][s.key] === null);
      if (!alone) return;
      const c = document.createElementNS(SVG, "circle");
      c.setAttribute("cx", x(i).toFixed(1)); c.setAttribute("cy", y(v).toFixed(1)); c.setAttribute("r", "2"); c.setAttribute("fill", s.color);
      c.setAttribute("data-series", s.key);
      kids.push(c);
    });
  }
  svg.replaceChildren(...kids);
}

function render(s) {
  $("meta").textContent = "router " + s.routerId + " · namespace " + s.namespace + " · mode " + s.mode + " · " + time(s.now);
  const order = ["aggregated", "decode", "prefill", "tensor"];
  const workers = [...s.workers].sort((a, b) => order.indexOf(a.role) - order.indexOf(b.role) || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) || (a.instanceId < b.instanceId ? -1 : 1));
  const rows = [];
  let pool = null;
  for (const w of workers) {
    if (w.role !== pool) { pool = w.role; const tr = document.createElement("tr"); const td = el("td", (POOLS[pool] || pool) + " pool", "pool"); td.colSpan = 8; tr.appendChild(td); rows.push(tr); }
    const l = w.load;
    rows.push(row([w.role, w.model, w.instanceId, { text: l ? l.running : "–", cls: "num" }, { text: l ? l.waiting : "–", cls: "num" }, l ? bar(l.kvUsage) : "–", { text: l ? pct(l.prefixHitRate) : "–", cls: "num" }, { text: w.decisions, cls: "num" }], { "data-instance": w.instanceId, "data-model": w.model, "data-role": w.role }));
  }
  if (s.workersTotal > s.workers.length) { const tr = document.createElement("tr"); const td = el("td", (s.workersTotal - s.workers.length) + " more workers not listed", "empty"); td.colSpan = 8; tr.appendChild(td); rows.push(tr); }
  fill($("workers").tBodies[0], rows, 8, "no workers");

  drawChart($("chart-rate"), s.series, [{ key: "rate", color: "#2f6fdb" }]);
  drawChart($("chart-ttft"), s.series, [{ key: "ttftP50", color: "#2f6fdb" }, { key: "ttftP90", color: "#d9822b" }]);
  drawChart($("chart-itl"), s.series, [{ key: "itlP50", color: "#2f6fdb" }, { key: "itlP90", color: "#d9822b" }]);

  $("decisions-total").textContent = "(" + s.decisionsTotal + " since start, newest first)";
  fill($("decisions").tBodies[0], s.decisions.map((d) => row([time(d.ts), d.model, d.pool, d.fallback ? d.mode + " (table down)" : d.mode, d.instanceId, { text: d.promptTokens, cls: "num" }, { text: d.overlapBlocks, cls: "num" }, { text: num(d.cost, 2), cls: "num" }, { text: d.candidates, cls: "num" }], { "data-instance": d.instanceId, "data-model": d.model })), 9, "no routing decision yet");

  const disagg = $("disagg");
  disagg.replaceChildren();
  if (s.disagg.length === 0) disagg.appendChild(el("p", "no disaggregated model has served a request", "empty"));
  for (const m of s.disagg) {
    const total = m.remote + m.local + m.fallback;
    disagg.appendChild(el("div", m.model + ": " + m.remote + " remote, " + m.local + " local, " + m.fallback + " fallback"));
    const split = el("div", undefined, "split");
    for (const [k, c] of [["remote", "#2f6fdb"], ["local", "#d9822b"], ["fallback", "#c5221f"]]) { const i = document.createElement("i"); i.style.width = (total > 0 ? (m[k] / total) * 100 : 0) + "%"; i.style.background = c; i.title = k; split.appendChild(i); }
    disagg.appendChild(split);
  }

  fill($("planner").tBodies[0], s.plannerDecisions.map((d) => row([time(d.ts), d.model, d.pool, { text: d.from + " → " + d.to + (d.dryRun ? " (dry run)" : ""), cls: "num" }, d.reason], { "data-pool": d.pool })), 5, "no planner decision seen");
  fill($("worker-events").tBodies[0], s.workerEvents.map((e) => row([time(e.ts), e.type, e.model, e.instanceId], { "data-instance": e.instanceId, "data-event": e.type })), 4, "none since the router started");
}

const source = new EventSource("dashboard/events");
source.addEventListener("snapshot", (ev) => { $("status").textContent = "live"; $("status").className = "live"; render(JSON.parse(ev.data)); });
source.onerror = () => { $("status").textContent = "reconnecting…"; $("status").className = "down"; };
</script>
</body>
</html>
`;
