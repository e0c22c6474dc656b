// One subscription: its WXQuery, the plan chosen and the alternatives priced, its delivery and
// latest results — fetched again whenever the network changes.
"use strict";

const sid = decodeURIComponent(location.pathname.replace(/^\/subscription\//, ""));
let inFlight = false;

function kv(table, pairs) {
  table.replaceChildren(...pairs.map(([k, v]) => SG.el("tr", {}, SG.el("th", {}, k), SG.el("td", {}, v))));
}

async function refresh() {
  if (inFlight) return;
  inFlight = true;
  try {
    const reply = await fetch(`/api/subscriptions/${encodeURIComponent(sid)}`);
    const s = await reply.json();
    if (!reply.ok) { SG.showError(s.error || `HTTP ${reply.status}`); return; }
    SG.showError(s.latest_error ? `latest results: ${s.latest_error}` : "");
    const health = s.health || {};
    kv(document.getElementById("delivery"), [
      ["registered at", s.superpeer], ["user", s.user || "–"], ["strategy", s.strategy || "–"],
      ["health", health.state + (health.reason ? `: ${health.reason}` : "") + (health.replans ? ` (${health.replans} re-plans)` : "")],
      ["results", s.results], ["delivery offset", `${s.delivered} (the subscriber has read every result before it)`],
      ["sample", s.sample > 1 ? `1/${s.sample} (approximate)` : "every item"],
      ["the past", SG.past(s.past) || "nothing left to replay (live)"],
      ["closed", s.closed ? "yes" : "no"], ["error", s.error || "none"]]);
    document.getElementById("query").textContent = s.query || "";
    const plan = s.plan || {parts: []};
    SG.table(document.getElementById("plan"),
      ["input", "reused stream", "at", "operators", "run at", "route", "delivered as", "cost"],
      plan.parts.map(p => ({attrs: {"data-input": p.input}, cells: [`${p.input} (${p.variable})`,
        p.widened_in_place ? `${p.reused_stream} (widened ${p.widened} in place)`
          : p.widened ? `${p.reused_stream} (widened ${p.widened})` : p.reused_stream, p.reuse_peer,
        p.operators.join("; ") || "none", p.operator_peer, SG.route(p.route), p.delivered_stream, SG.num(p.cost, 6)]})),
      plan.reason ? `no plan: ${plan.reason}` : "no plan yet");
    const alternatives = plan.parts.flatMap(p => (p.alternatives || []).map(a => ({...a, input: p.input})));
    SG.table(document.getElementById("alternatives"),
      ["input", "reuse stream", "at", "operators at", "route", "cost", "why not"],
      alternatives.map(a => ({cells: [a.input, a.reused_stream, a.reuse_peer, a.operator_peer, SG.route(a.route),
        SG.num(a.cost, 6), a.admitted ? "costs more" : `overloads: ${a.overloads.join("; ")}`]})),
      "no other plan was priced");
    document.getElementById("reoptimisation").textContent =
      s.reoptimisation ? `last re-optimisation round: ${s.reoptimisation}` : "";
    const switched = e => e.state === "switched" ? `switched at item ${e.switched_at_item}`
      : e.state === "recomputed" ? `recomputed from the log: ${e.why_recomputed}` : (e.state || "planned around it");
    SG.table(document.getElementById("history"),
      ["when", "why", "old cost", "new cost", "streams reused", "was reusing", "switch"],
      (s.plan_history || []).slice().reverse().map(e => ({cells: [e.at, e.why, SG.num(e.old_cost, 6),
        SG.num(e.new_cost, 6), (e.reused || []).join(", "), (e.old_reused || []).join(", "), switched(e)]})),
      "never re-planned: the plan it was registered with");
    document.getElementById("latest").replaceChildren(...(s.latest.length
      ? s.latest.map(r => SG.el("li", {value: r.offset}, SG.el("code", {}, r.item)))
      : [SG.el("li", {class: "none"}, "no results yet")]));
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  } catch (err) {
    SG.showError(`cannot read the subscription: ${err}`);
  } finally {
    inFlight = false;
  }
}

document.getElementById("sid").textContent = sid;
document.title = `StreamGlobe — ${sid}`;
refresh();
SG.connect(refresh);
