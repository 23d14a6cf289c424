// The broker's own health (GET /v1/health, no token): a banner above every
// page while the answers of one of its clusters' Slurm cannot be read. The
// broker then judges none of that cluster's jobs until they can be
// (doc/slurm-versions.md), and the site must know.
import { h, clock } from "./dom.js";

export async function showHealth(el) {
  let body;
  try {
    body = await (await fetch("/v1/health")).json();
  } catch {
    return;   // the broker itself unreachable: each page says so with its own request
  }
  const bad = Object.entries(body?.slurm_unreadable ?? {});
  el.hidden = bad.length === 0;
  el.replaceChildren(...bad.map(([cluster, e]) => h("p", {},
    `Cluster ${cluster}: Slurm's answers cannot be read since ${clock(e.since)} (${e.count} answers): ${e.error}. ` +
    `No job of ${cluster} is judged until they can be.`)));
}
