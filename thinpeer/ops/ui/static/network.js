// The network page: the backbone drawn with every stream along its route, tables of the same,
// faults, savings and time series — redrawn from each snapshot the server pushes.
"use strict";

const W = 1000, H = 640, MARGIN = 70, LANE = 7;
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#7f7f7f"];
const view = {snapshot: null, selected: null, signature: "", positions: {}, series: null, plotted: 0};

function positions(peers) {
  const given = peers.filter(p => Array.isArray(p.position));
  const out = {};
  if (given.length === peers.length && peers.length) {
    const xs = given.map(p => p.position[0]), ys = given.map(p => p.position[1]);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    for (const p of peers) {
      out[p.id] = [MARGIN + (W - 2 * MARGIN) * (x1 > x0 ? (p.position[0] - x0) / (x1 - x0) : 0.5),
                   MARGIN + (H - 2 * MARGIN) * (y1 > y0 ? (p.position[1] - y0) / (y1 - y0) : 0.5)];
    }
    return out;
  }
  peers.forEach((p, i) => {  // no drawing positions in the topology: a circle
    const a = 2 * Math.PI * i / peers.length;
    out[p.id] = [W / 2 + (W / 2 - MARGIN) * Math.cos(a), H / 2 + (H / 2 - MARGIN) * Math.sin(a)];
  });
  return out;
}

function colour(streams, id) {
  const i = streams.findIndex(s => s.id === id);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

function drawn(snapshot) { return snapshot.streams.filter(s => !s.original); }

function signature(s) {
  return JSON.stringify([s.superpeers.map(p => [p.id, p.up]), s.links.map(l => [l.id, l.state]),
                         drawn(s).map(x => [x.id, x.route, x.derived_at, x.subscriptions])]);
}

function select(kind, id) {
  view.selected = {kind, id};
  showDetails();
  document.querySelectorAll(".selected").forEach(n => n.classList.remove("selected"));
  document.querySelectorAll(`[data-${kind}="${CSS.escape(id)}"]`).forEach(n => n.classList.add("selected"));
}

function drawGraph(snapshot) {
  const svg = document.getElementById("graph");
  const pos = view.positions = positions(snapshot.superpeers);
  const streams = drawn(snapshot);
  const linksLayer = SG.el("g", {class: "links"});
  for (const link of snapshot.links) {
    const [a, b] = [pos[link.a], pos[link.b]];
    if (!a || !b) continue;
    linksLayer.append(SG.el("line", {class: "link", "data-link": link.id, "data-a": link.a, "data-b": link.b,
      "data-state": link.state, x1: a[0], y1: a[1], x2: b[0], y2: b[1], onclick: () => select("link", link.id)},
      SG.el("title", {}, `link ${link.id}`)));
    linksLayer.append(SG.el("text", {class: "link-label", "data-link-label": link.id,
      x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2 - 6, "text-anchor": "middle"}, ""));
  }
  // lanes: each stream on a link gets its own parallel offset, so shared links show every stream
  const lanes = {};
  for (const s of streams) for (const [x, y] of s.hops) {
    const key = [x, y].sort().join("|");
    lanes[key] = (lanes[key] || 0) + 1;
  }
  const used = {}, local = {};
  const streamLayer = SG.el("g", {class: "streams"});
  const marks = SG.el("g", {class: "marks"});
  for (const s of streams) {
    const c = colour(streams, s.id);
    const title = `${s.id} (${s.input}): ${SG.route(s.route)}` + (s.subscriptions.length ? ` — serves ${s.subscriptions.join(", ")}` : "");
    const click = () => select("stream", s.id);
    if (!s.hops.length) {  // computed and used at one peer: a ring, and a handle beside the peer
      const p = pos[s.route[0]];
      if (!p) continue;
      const k = local[s.route[0]] = (local[s.route[0]] || 0) + 1;
      const a = Math.PI * (0.75 + 0.22 * (k - 1));
      streamLayer.append(SG.el("circle", {class: "stream local", "data-stream": s.id,
        "data-route": s.route.join(" "), cx: p[0], cy: p[1], r: 26, stroke: c, onclick: click}, SG.el("title", {}, title)));
      marks.append(SG.el("circle", {class: "stream-handle", "data-stream": s.id, cx: p[0] + 32 * Math.cos(a),
        cy: p[1] + 32 * Math.sin(a), r: 6, fill: c, onclick: click}, SG.el("title", {}, title)));
      continue;
    }
    const points = [];
    let handle = null;
    for (const [x, y] of s.hops) {
      const [a, b] = [pos[x], pos[y]];
      if (!a || !b) continue;
      const key = [x, y].sort().join("|");
      const k = used[key] = (used[key] || 0) + 1;
      const off = (k - (lanes[key] + 1) / 2) * LANE;
      const len = Math.hypot(b[0] - a[0], b[1] - a[1]) || 1;
      const [nx, ny] = [-(b[1] - a[1]) / len * off, (b[0] - a[0]) / len * off];
      points.push([a[0] + nx, a[1] + ny], [b[0] + nx, b[1] + ny]);
      if (!handle) handle = [(a[0] + b[0]) / 2 + nx, (a[1] + b[1]) / 2 + ny];
    }
    if (!points.length) continue;
    const d = points.map((p, i) => `${i ? "L" : "M"}${p[0].toFixed(1)},${p[1].toFixed(1)}`).join(" ");
    streamLayer.append(SG.el("path", {class: "stream", "data-stream": s.id, "data-route": s.route.join(" "),
      d, stroke: c, "marker-end": "url(#arrow)", onclick: click}, SG.el("title", {}, title)));
    marks.append(SG.el("circle", {class: "stream-handle", "data-stream": s.id, cx: handle[0], cy: handle[1], r: 6,
      fill: c, onclick: click}, SG.el("title", {}, title)));
    if (s.derived_at && pos[s.derived_at]) {
      const [x, y] = pos[s.derived_at];
      const [dx, dy] = [x + 22, y - 22];
      marks.append(SG.el("polygon", {class: "duplication", "data-stream": s.id, "data-superpeer": s.derived_at,
        points: `${dx},${dy - 7} ${dx + 7},${dy} ${dx},${dy + 7} ${dx - 7},${dy}`, fill: c, onclick: click},
        SG.el("title", {}, `${s.id} derived from ${s.parent} at ${s.derived_at}`)));
    }
  }
  const peerLayer = SG.el("g", {class: "superpeers"});
  for (const p of snapshot.superpeers) {
    const [x, y] = pos[p.id];
    const sources = snapshot.streams.filter(s => s.original && s.origin === p.id).map(s => s.input);
    peerLayer.append(SG.el("g", {class: "superpeer", "data-superpeer": p.id, "data-up": String(p.up), onclick: () => select("superpeer", p.id)},
      SG.el("circle", {cx: x, cy: y, r: 20}),
      SG.el("text", {class: "peer-name", x, y: y + 5, "text-anchor": "middle"}, p.id),
      SG.el("text", {class: "peer-load", "data-peer-load": p.id, x, y: y + 36, "text-anchor": "middle"}, ""),
      sources.length ? SG.el("text", {class: "source", x, y: y - 28, "text-anchor": "middle"}, `⇢ ${sources.join(", ")}`) : null,
      SG.el("title", {}, `super-peer ${p.id}`)));
  }
  const defs = SG.el("defs", {});
  defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker>';
  svg.replaceChildren(defs, linksLayer, streamLayer, peerLayer, marks);
}

function updateGraph(snapshot) {
  for (const link of snapshot.links) {
    const label = document.querySelector(`[data-link-label="${CSS.escape(link.id)}"]`);
    if (label) label.textContent = `${SG.bits(link.bandwidth)} · ${SG.pct(link.utilisation)} · ${SG.bytes(link.bytes_per_s)}/s`;
    const line = document.querySelector(`line[data-link="${CSS.escape(link.id)}"]`);
    if (line) line.style.strokeWidth = 3 + Math.min(12, 40 * (link.utilisation || 0));
  }
  for (const p of snapshot.superpeers) {
    const label = document.querySelector(`[data-peer-load="${CSS.escape(p.id)}"]`);
    if (label) label.textContent = p.up ? `${SG.num(p.load, 3)} / ${SG.num(p.capacity, 1)}` : "down";
  }
}

function detailRows(pairs) {
  return SG.el("table", {class: "kv"}, pairs.map(([k, v]) => SG.el("tr", {}, SG.el("th", {}, k), SG.el("td", {}, v))));
}

function subLink(sid) { return SG.el("a", {href: `/subscription/${encodeURIComponent(sid)}`}, sid); }

function showDetails() {
  const box = document.getElementById("details");
  const snap = view.snapshot, sel = view.selected;
  if (!snap || !sel) return;
  let body;
  if (sel.kind === "stream") {
    const s = snap.streams.find(x => x.id === sel.id);
    body = s ? detailRows([["stream", s.id], ["input", s.input], ["kind", s.kind], ["route", SG.route(s.route)],
      ["derived from", s.parent ? `${s.parent} at ${s.derived_at}` : "— (original)"],
      ["operators", (s.operators || []).join("; ") || "none (a copy)"],
      ["selection", (s.selection || []).join(" ∧ ") || "none"],
      ["projection", (s.projection || []).join(", ") || "–"],
      ["window", s.window || "none"], ["aggregates", (s.aggregates || []).join(", ") || "none"],
      ["sample", s.sample > 1 ? `1/${s.sample}` : "every item"], ["estimate", SG.bits(s.bits_per_s)],
      ["serves", s.subscriptions.length ? s.subscriptions.flatMap((x, i) => i ? [", ", subLink(x)] : [subLink(x)]) : "no subscription"]])
      : SG.el("p", {}, `stream ${sel.id} is gone`);
  } else if (sel.kind === "superpeer") {
    const p = snap.superpeers.find(x => x.id === sel.id);
    body = p ? detailRows([["super-peer", p.id], ["address", p.address], ["state", p.up ? "up" : `down: ${p.error}`],
      ["load u_l(v)", `${SG.num(p.load, 4)} cores`], ["capacity l(v)", `${SG.num(p.capacity, 2)} cores`],
      ["utilisation", SG.pct(p.utilisation)], ["CPU measured", `${SG.num(p.cpu_cores, 2)} cores`],
      ["executor", p.executor || "–"], ["subscriptions here", p.subscriptions], ["operators", p.operators],
      ["reports down", Object.keys(p.down_peers || {}).join(", ") || "none"]]) : null;
  } else {
    const l = snap.links.find(x => x.id === sel.id);
    body = l ? detailRows([["link", l.id], ["bandwidth", SG.bits(l.bandwidth)], ["u_b(e), model", SG.bits(l.used_bits)],
      ["utilisation", SG.pct(l.utilisation)], ["measured", `${SG.bytes(l.bytes_per_s)}/s, ${SG.num(l.items_per_s, 1)} items/s`],
      ["carried so far", SG.bytes(l.bytes)], ["state", l.state + (l.reason ? `: ${l.reason}` : "")]]) : null;
  }
  box.replaceChildren(SG.el("h2", {}, "Details"), body || SG.el("p", {}, `${sel.kind} ${sel.id} is gone`));
  box.dataset.kind = sel.kind;
  box.dataset.id = sel.id;
}

function drawTables(s) {
  const peerState = p => p.up ? "up" : `down (${p.error})`;
  SG.table(document.getElementById("superpeers"),
    ["super-peer", "state", "load u_l(v)", "capacity l(v)", "utilisation", "CPU (cores)", "executor", "subscriptions", "operators"],
    s.superpeers.map(p => ({attrs: {"data-superpeer": p.id, "data-up": String(p.up), onclick: () => select("superpeer", p.id)},
      cells: [p.id, peerState(p), SG.num(p.load, 4), SG.num(p.capacity, 2), SG.pct(p.utilisation), SG.num(p.cpu_cores, 2),
              p.executor || "–", p.subscriptions, p.operators]})));
  SG.table(document.getElementById("links"),
    ["link", "bandwidth", "u_b(e) model", "utilisation", "measured", "items/s", "state"],
    s.links.map(l => ({attrs: {"data-link": l.id, "data-state": l.state, onclick: () => select("link", l.id)},
      cells: [l.id, SG.bits(l.bandwidth), SG.bits(l.used_bits), SG.pct(l.utilisation), `${SG.bytes(l.bytes_per_s)}/s`,
              SG.num(l.items_per_s, 1), l.state + (l.reason ? `: ${l.reason}` : "")]})));
  SG.table(document.getElementById("streams"),
    ["stream", "input", "route", "derived from", "operators", "window / aggregates", "estimate", "serves"],
    s.streams.map(x => ({attrs: {"data-stream": x.id, "data-route": x.route.join(" "), onclick: () => select("stream", x.id)},
      cells: [x.id, x.original ? `${x.input} (original)` : x.input, SG.route(x.route),
              x.parent ? `${x.parent} at ${x.derived_at}` : "–", (x.operators || []).join("; ") || "–",
              [x.window, (x.aggregates || []).join(", ")].filter(Boolean).join(" · ") || "–",
              SG.bits(x.bits_per_s), x.subscriptions.join(", ") || "–"]})), "no streams yet");
  SG.table(document.getElementById("subscriptions"),
    ["subscription", "at", "user", "health", "results", "delivered", "route", "streams"],
    s.subscriptions.map(x => ({attrs: {"data-subscription": x.id},
      cells: [subLink(x.id), x.superpeer, x.user || "–",
              (x.health || {}).state + ((x.health || {}).reason ? `: ${x.health.reason}` : "") + (x.sample > 1 ? ` (1/${x.sample} sample)` : "")
                + (SG.past(x.past) ? ` (the past: ${SG.past(x.past)})` : ""),
              x.results, x.delivered, (x.routes || []).map(SG.route).join("; "), x.streams.join(", ")]})), "no subscriptions yet");
  const faults = document.getElementById("faults");
  faults.replaceChildren(...(s.faults.length ? s.faults.map(f => SG.el("li", {class: "fault", "data-kind": f.kind,
      "data-superpeer": f.superpeer, "data-subscription": f.subscription, "data-link": f.link},
      SG.el("b", {}, `${f.kind} ${f.superpeer || f.link || f.subscription}`), `: ${f.reason}`))
    : [SG.el("li", {class: "none"}, "none")]));
  const m = s.savings.model, r = s.savings.measured;
  SG.table(document.getElementById("savings"), ["", "sharing", "data shipping", "saved"], [
    {attrs: {"data-figure": "model"}, cells: ["cost model", SG.bits(m.sharing_bits_per_s), SG.bits(m.data_shipping_bits_per_s), SG.pct(m.saving)]},
    {attrs: {"data-figure": "measured"}, cells: ["measured", `${SG.bytes(r.sharing_bytes_per_s)}/s`, `${SG.bytes(r.data_shipping_bytes_per_s)}/s`, SG.pct(r.saving)]}]);
}

function record(point) {
  const t = new Date(point.at * 1000);
  const series = view.series;
  series.t.push(t);
  series.total += 1;
  for (const [name, key] of [["links", "links"], ["utilisation", "utilisation"]]) {
    for (const [id, v] of Object.entries(point[key] || {})) {
      (series[name][id] = series[name][id] || new Array(series.t.length - 1).fill(null)).push(v);
    }
    for (const [id, values] of Object.entries(series[name])) if (values.length < series.t.length) values.push(null);
  }
  series.model.push(point.savings ? point.savings.model.saving : null);
  series.measured.push(point.savings ? point.savings.measured.saving : null);
  const extra = series.t.length - 600;
  if (extra > 0) {
    series.t.splice(0, extra); series.model.splice(0, extra); series.measured.splice(0, extra);
    for (const group of [series.links, series.utilisation]) for (const v of Object.values(group)) v.splice(0, extra);
  }
}

// Plotly (4.8 MB) is loaded after the first render, and the plots drawn only while on screen:
// points are appended (extendTraces), whole plots redrawn only when their traces change.
const PLOTS = {visible: false, loading: false, traces: {}, plotted: 0};

function loadPlotly() {
  if (PLOTS.loading) return;
  PLOTS.loading = true;
  document.head.append(SG.el("script", {src: "/vendor/plotly.min.js", async: true, onload: () => plot(true)}));
  new IntersectionObserver(entries => {
    PLOTS.visible = entries.some(e => e.isIntersecting);
    if (PLOTS.visible) plot(true);
  }).observe(document.querySelector(".plots"));
}

function plotData() {
  const s = view.series;
  const busy = Object.entries(s.links).filter(([, v]) => v.some(x => x));
  return {
    "traffic-plot": {title: "traffic per link (bytes/s)", traces: busy},
    "load-plot": {title: "load per super-peer (u_l(v) / l(v))", traces: Object.entries(s.utilisation)},
    "savings-plot": {title: "saved by sharing against data shipping", percent: true,
                     traces: [["cost model", s.model], ["measured", s.measured]]},
  };
}

function plot(force = false) {
  if (typeof Plotly === "undefined" || !PLOTS.visible) return;
  if (!force && Date.now() - view.plotted < 2000) return;
  view.plotted = Date.now();
  const s = view.series;
  const fresh = Math.min(s.total - PLOTS.plotted, s.t.length);
  for (const [div, p] of Object.entries(plotData())) {
    const names = p.traces.map(([name]) => name).join("|");
    if (force || PLOTS.traces[div] !== names) {
      PLOTS.traces[div] = names;
      Plotly.react(div, p.traces.map(([name, v]) => ({x: s.t.slice(), y: v.slice(), name, mode: "lines"})),
        {title: {text: p.title}, height: 260, margin: {l: 60, r: 10, t: 40, b: 40}, showlegend: true,
         legend: {font: {size: 10}}, xaxis: {type: "date"}, ...(p.percent ? {yaxis: {tickformat: ".0%"}} : {})},
        {displayModeBar: false});
    } else if (fresh > 0 && p.traces.length) {
      Plotly.extendTraces(div, {x: p.traces.map(() => s.t.slice(-fresh)), y: p.traces.map(([, v]) => v.slice(-fresh))},
                          p.traces.map((_, i) => i), 600);
    }
  }
  PLOTS.plotted = s.total;
}

// How fast the page renders (benchmarks/web_view.py reads it): when the first snapshot was
// drawn, and each render's end and duration (ms since navigation started).
window.sgStats = {scriptStart: performance.now(), firstEvent: null, firstRender: null, renders: [], phases: {}};

function onSnapshot(snapshot) {
  SG.showError(snapshot.error);
  if (!snapshot.superpeers) return;  // no backbone read yet (the error says why)
  const started = performance.now();
  view.snapshot = snapshot;
  const up = snapshot.superpeers.filter(p => p.up).length;
  document.getElementById("summary").textContent =
    `${snapshot.superpeers.length} super-peers (${up} up) · ${snapshot.links.length} links · ` +
    `${snapshot.streams.length} streams · ${snapshot.subscriptions.length} subscriptions` +
    (snapshot.user ? ` · as ${snapshot.user}` : "") + ` · ${new Date(snapshot.at * 1000).toLocaleTimeString()}`;
  const phase = (name, f) => {
    const t = performance.now(); f();
    window.sgStats.phases[name] = (window.sgStats.phases[name] || 0) + performance.now() - t;
  };
  if (window.sgStats.firstEvent === null) window.sgStats.firstEvent = started;
  const sig = signature(snapshot);
  if (sig !== view.signature) { phase("graph", () => drawGraph(snapshot)); view.signature = sig; }
  phase("labels", () => updateGraph(snapshot));
  phase("tables", () => drawTables(snapshot));
  if (view.selected) phase("select", () => select(view.selected.kind, view.selected.id));
  if (view.series) { record({at: snapshot.at, links: Object.fromEntries(snapshot.links.map(l => [l.id, l.bytes_per_s])),
    utilisation: Object.fromEntries(snapshot.superpeers.map(p => [p.id, p.utilisation])), savings: snapshot.savings});
    phase("plots", plot); }
  document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  const ended = performance.now();
  if (window.sgStats.firstRender === null) { window.sgStats.firstRender = ended; loadPlotly(); }
  window.sgStats.renders.push([ended, ended - started]);
  if (window.sgStats.renders.length > 1000) window.sgStats.renders.shift();
}

async function start() {
  view.series = {t: [], total: 0, links: {}, utilisation: {}, model: [], measured: []};
  try {
    const history = await (await fetch("/api/history")).json();
    history.forEach(record);
  } catch (err) { console.warn("no history", err); }
  SG.connect(onSnapshot);
}

start();
