// A run's checkpoint policy (GET /v1/runs/ID/policy, broker/policy/policy.cpp)
// in the words of `shard ckpt policy RUN` (sbatch-wrappers/ckpt_policy.cpp):
// the interval in force, the latest computation, each input with its source
// and sample count, each tier's recovery phases.
import { h } from "./dom.js";

// ckpt::format_duration (common/ckpt_model.cpp): "0.86 s", "24.0 h".
export function fmtDuration(sec) {
  const f = (v, unit) => `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${unit}`;
  const s = Number(sec) || 0;
  if (s < 120) return f(s, "s");
  if (s < 2 * 3600) return f(s / 60, "min");
  if (s < 2 * 86400) return f(s / 3600, "h");
  return f(s / 86400, "d");
}
const g = (x, digits) => String(Number((Number(x) || 0).toPrecision(digits)));
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const source = (m, one, many) => (m.source === "prior" ? "site prior" : `${m.source}, ${plural(Number(m.samples) || 0, one, many)}`);

// The answer -> {headline, computed: [lines], inputs: [{name, value, source}],
// tiers: [{tier, recoveries, detect, place, start, restore, total, line}], state}.
// inForce: the POLICY event of the version in force ({version, every_steps, seconds}), if seen.
export function policyView(p, inForce = null) {
  const v = { state: p.state, headline: "", computed: [], inputs: [], tiers: [], waiting: p.waiting_for ?? null };
  if (p.state === "fixed") { v.headline = p.message ?? "a fixed interval"; return v; }
  if (p.version > 0) {
    const secs = inForce?.version === p.version ? ` = ${fmtDuration(inForce.seconds)} of compute` : "";
    v.headline = `checkpoint every ${p.every_steps} steps${secs} (policy v${p.version}, Daly 2006)`;
  } else {
    v.headline = `no interval yet (the trainer uses its default); waiting for ${p.waiting_for ?? "measurements"}`;
  }
  const c = p.computed;
  if (c) {
    v.computed.push(`now computed: every ${c.every_steps} steps = ${fmtDuration(c.seconds)} of compute; Daly ${fmtDuration(c.daly_seconds)}, ` +
      `Young 1974 ${fmtDuration(c.young_seconds)}, complete model's optimum ${fmtDuration(c.optimum_seconds)}`);
    v.computed.push(`expected waste ${(100 * (c.expected_waste ?? 0)).toFixed(1)}% of wall time (writes, lost work, restarts)`);
  }
  const i = p.inputs;
  if (!i) return v;
  const w = i.write_seconds, st = i.step_seconds, m = i.mtbf_seconds, r = i.restart_seconds;
  v.inputs.push({ name: "write time (delta)", value: w ? fmtDuration(w.value) : "-",
    source: w ? `${source(w, "sealed checkpoint", "sealed checkpoints")} (median)` : "not measured yet" });
  v.inputs.push({ name: "step time", value: st ? fmtDuration(st.value) : "-", source: st ? source(st, "step", "steps") : "not measured yet" });
  if (m) {
    const nodes = m.nodes ?? 1, faults = m.interruptions ?? 0;
    v.inputs.push({ name: "mean time to interruption (M)", value: fmtDuration(m.value),
      source: `a node's ${fmtDuration(m.node_value)} / ${plural(nodes, "node", "nodes")}: ${plural(faults, "interruption", "interruptions")} in ` +
        `${g(m.node_hours_observed, 3)} node-hours observed + prior ${g(m.prior_node_hours, 6)} h (${m.source})` });
  }
  if (r) {
    v.inputs.push({ name: "restart (R)", value: fmtDuration(r.value),
      source: r.source === "prior" ? "site prior (no recovery measured yet)" : `${source(r, "recovery", "recoveries")} (median)` });
    for (const t of r.tiers ?? []) {
      const n = t.recoveries ?? 0;
      v.tiers.push({ ...t, line: `${t.tier} ${n} recover${n === 1 ? "y" : "ies"}: detect ${fmtDuration(t.detect)}, place ${fmtDuration(t.place)}, ` +
        `start ${fmtDuration(t.start)}, first step ${fmtDuration(t.restore)} = ${fmtDuration(t.total)}` });
    }
  }
  return v;
}

// The panel.
export function policyPanel(p, inForce) {
  const v = policyView(p, inForce);
  const stateWord = { in_force: "in force", measuring: "measuring", fixed: "fixed by the job" }[v.state] ?? v.state;
  const out = h("div", { id: "policy", "data-state": v.state ?? "" },
    h("p", { id: "policy-headline" }, h("b", {}, `${stateWord}: `), v.headline),
    v.computed.map((l) => h("p", { class: "policy-computed" }, l)));
  if (v.inputs.length) {
    out.append(h("div", { class: "table-wrap" }, h("table", { id: "policy-inputs" },
      h("caption", {}, "Inputs"),
      h("thead", {}, h("tr", {}, ["Input", "Value", "Source"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, v.inputs.map((i) => h("tr", {}, h("td", {}, i.name), h("td", {}, i.value), h("td", {}, i.source)))))));
  }
  if (v.tiers.length) {
    out.append(h("div", { class: "table-wrap" }, h("table", { id: "policy-tiers" },
      h("caption", {}, "Recovery phases per tier (the broker's last 100 recoveries, mean seconds)"),
      h("thead", {}, h("tr", {}, ["Tier", "Recoveries", "Detect", "Place", "Start", "First step", "Total"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, v.tiers.map((t) => h("tr", { "aria-label": t.line }, h("td", {}, t.tier), h("td", {}, t.recoveries),
        [t.detect, t.place, t.start, t.restore, t.total].map((x) => h("td", {}, fmtDuration(x)))))))));
  } else if (v.inputs.length) {
    out.append(h("p", { class: "note" }, "No recovery timed yet: R is the site's prior."));
  }
  return out;
}
