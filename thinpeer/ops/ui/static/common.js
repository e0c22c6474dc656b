// Helpers both pages share: formatting, tables, and the live connection (server-sent events).
"use strict";

const SG = {
  el(tag, attrs = {}, ...children) {
    const svg = ["svg", "g", "line", "path", "circle", "text", "title", "rect", "polygon"].includes(tag);
    const node = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  },
  // a value in its unit's thousands: 1234567 B -> "1.2 MB"
  scaled(v, units) {
    if (v === null || v === undefined) return "–";
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(v < 10 && i ? 1 : 0)} ${units[i]}`;
  },
  bytes(v) { return SG.scaled(v, ["B", "kB", "MB", "GB"]); },
  bits(v) { return SG.scaled(v, ["bit/s", "kbit/s", "Mbit/s", "Gbit/s"]); },
  pct(v) { return v === null || v === undefined ? "–" : `${(100 * v).toFixed(v < 0.1 ? 2 : 1)} %`; },
  num(v, digits = 2) { return v === null || v === undefined ? "–" : Number(v).toFixed(digits); },
  route(r) { return (r || []).join(" → "); },
  // a subscription over the past: how far the replay of each stream's past has come ("" if live)
  past(p) {
    return Object.entries(p || {}).map(([name, x]) =>
      `${name}: ${x.next_item - x.first_item} of ${x.live_from - x.first_item} past items replayed (${Math.floor(100 * x.fraction)}%)`).join("; ");
  },
  // A table from headers and rows (each row: {cells: [...], attrs: {...}}), replaced whole.
  table(node, headers, rows, empty = "none") {
    // unchanged since the last update (by the cells' text): left alone, so that a big table
    // costs nothing while it does not change
    const key = JSON.stringify(rows.map(r => r.cells.map(c => c instanceof Node ? c.textContent : c)));
    if (node.dataset.key === key) return;
    node.dataset.key = key;
    const head = SG.el("thead", {}, SG.el("tr", {}, headers.map(h => SG.el("th", {}, h))));
    const body = SG.el("tbody", {}, rows.length ? rows.map(r => SG.el("tr", r.attrs || {}, r.cells.map(c => SG.el("td", {}, c))))
      : [SG.el("tr", {class: "none"}, SG.el("td", {colspan: headers.length}, empty))]);
    node.replaceChildren(head, body);
  },
  showError(message) {
    const box = document.getElementById("error");
    box.hidden = !message;
    box.textContent = message || "";
  },
  // Each snapshot the server publishes, as it comes; the browser reconnects on its own.
  connect(onSnapshot) {
    const state = document.getElementById("connection");
    const source = new EventSource("/api/events");
    source.addEventListener("open", () => { state.dataset.state = "live"; state.textContent = "live"; });
    source.addEventListener("error", () => { state.dataset.state = "lost"; state.textContent = "connection lost: retrying…"; });
    source.addEventListener("network", e => {
      try { onSnapshot(JSON.parse(e.data)); }
      catch (err) { SG.showError(`cannot show this update: ${err}`); console.error(err); }
    });
    return source;
  },
};
