// A run's goodput as GET /v1/runs/ID answers it (doc/goodput.md): the
// ratio, where the wall time went, and each fault's cost. The broker
// computes it; this only shows it (productive + unsealed + lost = wall).
import { h, duration, clock } from "./dom.js";

const PARTS = [["startup", "start-up"], ["redone", "redone"], ["detection", "detection"], ["placement", "placement"],
  ["queue_wait", "queue wait"], ["restart", "restart"], ["not_kept", "not kept (after the last seal)"], ["unattributed", "no fault named"]];

export function goodputPanel(g) {
  if (!g) return h("p", { class: "note" }, "No goodput from this broker.");
  if (!g.wall) return h("p", { class: "note" }, "Not started yet.");
  const live = g.end === null;
  const lost = g.lost ?? {};
  return h("div", {},
    h("p", { id: "goodput-ratio" }, h("b", {}, `${(100 * g.ratio).toFixed(1)}% productive`),
      `: ${duration(g.productive)} of ${duration(g.wall)} wall${live ? ` so far (as of ${clock(g.as_of)})` : ""}.`),
    h("div", { class: "kv", id: "goodput-parts" },
      h("span", {}, "Productive"), h("span", {}, `${duration(g.productive)} (steps a sealed checkpoint kept)`),
      h("span", {}, "Unsealed"), h("span", {}, `${duration(g.unsealed)}${live ? " (since the last seal: at risk)" : ""}`),
      h("span", {}, "Lost"), h("span", {}, `${duration(lost.total)}${lost.total ? ": " : ""}` +
        PARTS.filter(([k]) => lost[k] > 0).map(([k, name]) => `${name} ${duration(lost[k])}`).join(", "))),
    (g.faults ?? []).length ? faultTable(g.faults, g.start) : h("p", { class: "note" }, "No fault has cost this run time."));
}

function faultTable(faults, start) {
  const cols = ["Attempt", "Node", "Cause", "Failed", "Resumed from", "Recovered by", "Redone", "Detection", "Placement", "Queue wait", "Restart", "Lost"];
  return h("div", { class: "table-wrap" }, h("table", { id: "goodput-faults" },
    h("caption", {}, "Time lost per fault"),
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, faults.map((f) => h("tr", {},
      h("td", {}, f.attempt), h("td", {}, f.node), h("td", {}, f.cause),
      h("td", {}, `${clock(f.failed_at)} (+${duration(f.failed_at - start)})`),
      h("td", {}, f.resumed_from ?? "the start"),
      h("td", {}, f.in_job ? "in-job restart" : f.next_attempt ? `attempt ${f.next_attempt}` : "not yet"),
      ...["redone", "detection", "placement", "queue_wait", "restart", "total"].map((k) => h("td", {}, duration(f.lost?.[k]))))))));
}
