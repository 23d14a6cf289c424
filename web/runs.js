// Runs: every run the token may see (GET /v1/views/runs), sortable by any
// column, filtered by text and state, refreshed every 2 s.
import { h, page, state, duration, clickableRow, errorBox } from "./dom.js";
import { get } from "./api.js";

const COLUMNS = [
  { key: "id", label: "Run" },
  { key: "owner", label: "Owner" },
  { key: "state", label: "State" },
  { key: "cluster", label: "Cluster" },
  { key: "attempt", label: "Attempts", num: true },
  { key: "workers_healthy", label: "Workers n/N", num: true },
  { key: "step", label: "Step", num: true },
  { key: "last_sealed", label: "Last sealed checkpoint" },
  { key: "age", label: "Age", num: true },
];
const REFRESH_MS = 2000;

export function render() {
  let rows = [], at = 0, sortKey = "age", ascending = true, timer = null, first = true;
  const text = h("input", { id: "runs-filter", type: "search", placeholder: "run, owner or cluster" });
  const states = h("select", { id: "runs-state" }, h("option", { value: "" }, "any"),
    ["PENDING", "RUNNING", "DEGRADED", "RECOVERING", "SUCCEEDED", "FAILED", "CANCELLED"].map((s) => h("option", { value: s }, s)));
  const status = h("p", { class: "note live", role: "status", id: "runs-status" });
  const head = h("tr");
  const body = h("tbody", { id: "runs-body" });
  const table = h("table", { id: "runs-table" }, h("caption", { class: "note" }, "Enter or click opens a run."), h("thead", {}, head), body);
  const drawHead = () => {
    head.replaceChildren(...COLUMNS.map((c) => h("th", {
      scope: "col", "aria-sort": c.key === sortKey ? (ascending ? "ascending" : "descending") : "none" },
      h("button", { type: "button", onclick: () => { ascending = c.key === sortKey ? !ascending : true; sortKey = c.key; drawHead(); draw(); } },
        c.label, c.key === sortKey ? (ascending ? " ▲" : " ▼") : ""))));
  };
  const value = (r, k) => (k === "age" ? at - (r.created ?? at) : r[k]);
  const draw = () => {
    const q = text.value.trim().toLowerCase(), st = states.value;
    const shown = rows.filter((r) => (!st || r.state === st) &&
      (!q || [r.id, r.owner, r.cluster].some((v) => (v ?? "").toLowerCase().includes(q))));
    shown.sort((a, b) => {
      const x = value(a, sortKey) ?? "", y = value(b, sortKey) ?? "";
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return ascending ? c : -c;
    });
    const focused = document.activeElement?.dataset?.run;
    const frag = document.createDocumentFragment();
    for (const r of shown) {
      const tr = clickableRow([
        h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.id)}`, tabindex: -1 }, r.id)),
        r.owner || "(unclaimed)", h("td", {}, state(r.state)), r.cluster ?? "–", r.attempt,
        `${r.workers_healthy}/${r.workers}${r.world_size ? ` (${r.ranks}/${r.world_size} ranks)` : ""}`,
        r.step ?? "–", r.last_sealed ?? "none", duration(value(r, "age")),
      ], () => { location.hash = `#/runs/${encodeURIComponent(r.id)}`; }, `run ${r.id}, ${r.state}`);
      tr.dataset.run = r.id;
      frag.append(tr);
    }
    body.replaceChildren(frag);
    if (focused) body.querySelector(`tr[data-run="${CSS.escape(focused)}"]`)?.focus();
    status.textContent = `${shown.length} of ${rows.length} runs · queried at ${new Date(at * 1000).toLocaleTimeString(undefined, { hour12: false })} · refreshed every ${REFRESH_MS / 1000} s`;
  };
  text.addEventListener("input", draw);
  states.addEventListener("change", draw);
  const err = h("div", { role: "alert" });
  const load = async () => {
    try {
      const v = await get("/v1/views/runs");
      if (first) performance.mark("runs-data");
      rows = v.runs;
      at = v.at;
      err.replaceChildren();
      draw();
      if (first) { first = false; performance.mark("runs-rendered"); }
    } catch (e) {
      err.replaceChildren(errorBox(e));
    }
    timer = setTimeout(load, REFRESH_MS);
  };
  drawHead();
  page("Runs", h("div", { class: "filters" },
    h("label", {}, "Filter", text), h("label", {}, "State", states)), err, status, h("div", { class: "table-wrap" }, table));
  load();
  return () => clearTimeout(timer);
}
