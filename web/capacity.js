// Capacity: the market table (GET /v1/capacity: this broker's clusters and
// its peers'), asked again when the filters change. A peer or cluster that
// did not answer is "unknown", never available. A row of this broker's
// opens to its nodes as Slurm names them (GET /v1/capacity?nodes=1), each
// to its descriptor when shardnet-probe reported one (accelerators, NICs,
// NUMA), so that one sees why a cluster fits or not.
import { h, page, state, clock, errorBox } from "./dom.js";
import { get } from "./api.js";

const FILTERS = [
  { key: "class", label: "Accelerator class", placeholder: "H100, V100, none" },
  { key: "gpus_per_node", label: "GPUs per node (at least)", type: "number" },
  { key: "gpu_memory_gb", label: "GPU memory GB (at least)", type: "number" },
  { key: "fabric", label: "Fabric", options: ["", "nvlink", "infiniband", "roce", "ethernet", "xgmi"] },
  { key: "region", label: "Region" },
];

export function render() {
  const inputs = {};
  const form = h("form", { class: "filters", id: "capacity-filters", onsubmit: (e) => { e.preventDefault(); load(); } },
    FILTERS.map((f) => {
      const el = f.options
        ? h("select", { name: f.key }, f.options.map((o) => h("option", { value: o }, o || "any")))
        : h("input", { name: f.key, type: f.type ?? "text", min: f.type ? 0 : null, placeholder: f.placeholder ?? "" });
      inputs[f.key] = el;
      return h("label", {}, f.label, el);
    }),
    h("button", { type: "submit" }, "Query"));
  const out = h("div", { id: "capacity-out" });
  page("Capacity", form, out);
  let nodes = null;   // GET /v1/nodes, once per page
  const load = async () => {
    const q = new URLSearchParams({ nodes: "1" });
    for (const [k, el] of Object.entries(inputs)) if (el.value.trim()) q.set(k, el.value.trim());
    out.replaceChildren(h("p", { class: "note" }, "Asking the broker and its peers…"));
    try {
      const cap = await get(`/v1/capacity?${q}`);
      out.replaceChildren(...table(cap, async () => (nodes ??= (await get("/v1/nodes")).nodes)));
      performance.mark("capacity-rendered");
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  };
  load();
  return null;
}

function table(cap, loadNodes) {
  const body = h("tbody", { id: "capacity-body" });
  for (const r of cap.clusters) {
    const ok = r.status === "ok";
    const detail = h("tr", { hidden: true }, h("td", { colspan: 10 }));
    const toggle = h("button", { type: "button", "aria-expanded": "false",
      onclick: async () => {
        const open = toggle.getAttribute("aria-expanded") !== "true";
        toggle.setAttribute("aria-expanded", String(open));
        toggle.textContent = open ? "Hide nodes" : "Nodes";
        detail.hidden = !open;
        if (open) detail.firstChild.replaceChildren(await nodesOf(r, loadNodes));
      } }, "Nodes");
    body.append(h("tr", { "data-cluster": r.cluster, "data-broker": r.broker, "data-total": ok ? r.total_nodes : null },
      h("td", {}, r.broker), h("td", {}, r.cluster), h("td", {}, r.region || "–"),
      h("td", {}, state(ok ? "ok" : "unknown"), ok ? null : h("div", { class: "note" }, r.reason ?? "did not answer")),
      h("td", {}, r.accelerator_class ?? "–"), h("td", {}, r.gpus_per_node ?? "–"),
      h("td", {}, r.gpu_memory_gb === null || r.gpu_memory_gb === undefined ? "–" : `${r.gpu_memory_gb} GB`),
      h("td", {}, r.fabric ?? "–"),
      h("td", { class: "nodes" }, ok ? `${r.idle_nodes} idle of ${r.total_nodes}` : "unknown"),
      h("td", {}, ok ? toggle : null)), detail);
  }
  const peers = cap.peers.length
    ? h("ul", { id: "capacity-peers" }, cap.peers.map((p) => h("li", {}, `broker ${p.name}: `, state(p.status),
      p.status === "ok" ? "" : ` — ${p.reason ?? "no answer"} (its capacity is not counted)`)))
    : h("p", { class: "note" }, "No peer brokers configured.");
  return [
    h("p", { id: "capacity-at" }, `Broker ${cap.broker}, queried at ${clock(cap.queried_at)}; idle GPUs here: ${cap.local_idle_gpus}.`),
    h("div", { class: "table-wrap" }, h("table", { id: "capacity-table" },
      h("thead", {}, h("tr", {}, ["Broker", "Cluster", "Region", "Status", "Class", "GPUs/node", "GPU memory", "Fabric", "Nodes", ""].map(
        (c) => h("th", { scope: "col" }, c)))),
      cap.clusters.length ? body : h("tbody", {}, h("tr", {}, h("td", { colspan: 10 }, "No cluster matches these filters."))))),
    h("h2", {}, "Peer brokers"), peers,
  ];
}

// A row's nodes: Slurm's names and states, each with its descriptor's
// summary and the descriptor itself when this broker has one. A peer's row
// lists none (its nodes are its broker's to show).
async function nodesOf(row, loadNodes) {
  if (!Array.isArray(row.nodes)) return h("p", { class: "note" }, `The nodes of broker ${row.broker}'s clusters are listed by that broker's own dashboard.`);
  let all;
  try { all = await loadNodes(); } catch (e) { return errorBox(e); }
  const byHost = new Map(all.map((n) => [n.host, n]));
  return h("ul", { class: "capacity-nodes" }, row.nodes.map((node) => {
    const d = node.described ? byHost.get(node.name) : null;
    if (!d) return h("li", { "data-node": node.name }, `${node.name} (${node.state}): no descriptor — shardnet-probe has not reported this node, its class is unknown`);
    const more = h("div");
    const b = h("button", { type: "button", "aria-expanded": "false", onclick: async () => {
      const open = b.getAttribute("aria-expanded") !== "true";
      b.setAttribute("aria-expanded", String(open));
      if (!open) return more.replaceChildren();
      try { more.replaceChildren(descriptor(await get(`/v1/nodes/${encodeURIComponent(d.host)}`))); } catch (e) { more.replaceChildren(errorBox(e)); }
    } }, "Descriptor");
    return h("li", { "data-node": node.name }, `${node.name} (${node.state}): ${d.accelerators.length} × ${d.accelerators[0] ?? "no accelerator"}, fabric ${[].concat(d.fabric ?? []).join(", ") || "–"} `, b, more);
  }));
}

function descriptor(d) {
  const gb = (b) => (b ? `${(b / 2 ** 30).toFixed(0)} GiB` : "–");
  return h("div", { class: "kv" },
    h("span", {}, "CPU"), h("span", {}, `${d.cpu?.model ?? "?"}: ${d.cpu?.packages ?? "?"} packages, ${d.cpu?.cores ?? "?"} cores`),
    h("span", {}, "Memory"), h("span", {}, gb(d.memory?.total_bytes)),
    h("span", {}, "NUMA"), h("span", {}, (d.cpu?.numa ?? []).map((n) => `node ${n.index}: CPUs ${n.cpus ?? "none"}, ${gb(n.memory_bytes)}`).join("; ") || "–"),
    h("span", {}, "Accelerators"), h("span", {}, (d.accelerators ?? []).map((a) => `${a.model ?? a.class} (NUMA ${a.numa ?? "?"}, ${a.pci_bus ?? ""})`).join("; ") || "none"),
    h("span", {}, "NICs"), h("span", {}, (d.nics ?? []).map((n) => `${n.name ?? n.device ?? "?"} ${n.kind ?? ""} ${n.rate_gbps ? n.rate_gbps + " Gb/s" : ""}`).join("; ") || "none"),
    h("span", {}, "Fabric"), h("span", {}, [].concat(d.fabric?.summary ?? []).join(", ") || "–"));
}
