// A run: its timeline, recoveries, workers, placement reasons, checkpoint
// lineage and events, live through the run's event stream (sse.js).
import { h, page, state, duration, clock, clickableRow, errorBox } from "./dom.js";
import { get } from "./api.js";
import { follow } from "./sse.js";
import { model, withOnward } from "./recovery.js";
import { draw } from "./timeline.js";
import { policyPanel } from "./policy.js";
import { loadReceipts, receiptsPanel } from "./receipts.js";
import { goodputPanel } from "./goodput.js";

const PAGE = 10000;          // GET .../events?limit= at most
const EVENTS_SHOWN = 300;    // rows of the event table before "show all"

export function render(id) {
  const path = `/v1/runs/${encodeURIComponent(id)}`;
  const main = page(`Run ${id}`, h("p", { class: "note" }, "Loading…"));
  let events = [], view = null, detail = null, checkpoints = [], stream = null, timer = null, gone = false, showAll = false;
  let opened = null, redrawQueued = false;
  const parts = {
    summary: h("div", { id: "run-summary" }), live: h("p", { class: "note live", role: "status", id: "run-live" }),
    timeline: h("div", { id: "run-timeline" }), detail: h("div", { id: "event-detail", "aria-live": "polite" }),
    recoveries: h("div", { id: "run-recoveries" }), goodput: h("div", { id: "run-goodput" }), workers: h("div", { id: "run-workers" }),
    placements: h("div", { id: "run-placements" }), lineage: h("div", { id: "run-lineage" }), events: h("div", { id: "run-events" }),
    policy: h("div", { id: "run-policy" }), receipts: h("div", { id: "run-receipts", "aria-live": "polite" }),
  };
  // The checkpoint policy: read again at each POLICY event (and with the
  // state); the seconds of the version in force are its POLICY event's.
  let policy = null, receipts = null, receiptsTimer = null, loading = true;
  const inForce = () => events.findLast((e) => e.kind === "POLICY")?.evidence ?? null;
  let policyShown = "";
  const showPolicy = () => {
    const shown = JSON.stringify([policy, inForce()]);
    if (gone || !policy || shown === policyShown) return;
    policyShown = shown;
    parts.policy.replaceChildren(policy.error ? h("p", { class: "error" }, `Policy not read: ${policy.error}`) : policyPanel(policy, inForce()));
  };
  const refreshPolicy = async () => {
    try { policy = await get(`${path}/policy`); } catch (e) { policy = { error: e.message }; }
    if (!loading) showPolicy();
  };
  // The receipts, verified here; only asked for when the broker signs them.
  let receiptsBusy = false, receiptsAgain = false;
  const refreshReceipts = async () => {
    if (gone || !view) return;
    if (receiptsBusy) { receiptsAgain = true; return; }
    receiptsBusy = true;
    const before = receipts;
    if (!view.receipts) receipts = before?.off ? before : { off: true };
    else {
      try { receipts = await loadReceipts(id, receipts?.receipts ? receipts : null); } catch (e) { receipts = { error: e.message }; }
    }
    receiptsBusy = false;
    if (gone) return;
    if (receipts !== before) parts.receipts.replaceChildren(receiptsPanel(receipts));
    if (receiptsAgain) { receiptsAgain = false; refreshReceipts(); }
  };
  const openEvent = (ev) => {
    opened = ev;
    parts.detail.replaceChildren(h("div", { class: "event-detail", id: "event-open", tabindex: -1 },
      h("p", {}, h("b", {}, `${ev.kind} `), `${eventId(ev)} at ${clock(ev.time)}`),
      h("p", {}, "Cause: ", ev.cause),
      // The job's own last words, as lines: text like every value here, never markup.
      typeof ev.evidence?.stderr_tail === "string" &&
        [h("p", {}, "Last lines of the batch script's standard error:"), h("pre", { class: "stderr-tail" }, ev.evidence.stderr_tail)],
      h("p", {}, "Evidence:"), h("pre", {}, JSON.stringify(ev.evidence, null, 2)),
      h("button", { type: "button", onclick: () => { opened = null; parts.detail.replaceChildren(); } }, "Close")));
    parts.detail.firstChild.focus();
  };
  const redraw = () => {
    redrawQueued = false;
    if (gone || !view) return;
    // A run moved to a peer: its story there joins this broker's.
    const story = withOnward(events, view.attempts ?? [], view.onward);
    const m = model(story.events, { attempts: story.attempts, broker: view.broker ?? "", now: Date.now() / 1000,
      state: view.onward?.run?.state ?? view.state });
    parts.summary.replaceChildren(h("div", { class: "kv" },
      h("span", {}, "State"), h("span", {}, state(view.state)),
      h("span", {}, "Owner"), h("span", {}, view.owner || "(unclaimed)"),
      h("span", {}, "Attempt"), h("span", {}, `${view.attempt} on ${view.cluster ?? "a cluster not recorded"}`),
      h("span", {}, "Workers"), h("span", {}, `${view.workers_healthy} of ${view.workers} healthy`),
      h("span", {}, "Step"), h("span", {}, view.step ?? "–"),
      h("span", {}, "Last sealed"), h("span", {}, view.last_sealed ?? "none"),
      view.onward && [h("span", {}, "Moved to"), h("span", { id: "run-onward" }, onwardText(view.onward))]));
    // The window's width, not the element's: reading an element's forces a
    // layout of the whole page first (a third of a big run's render).
    const width = Math.min(window.innerWidth, 1600) - 48;
    parts.timeline.replaceChildren(draw(m, { width, onOpen: openEvent }), h("div", { class: "legend" },
      h("span", {}, "■ FAULT"), h("span", {}, "◆ PLACEMENT"), h("span", {}, "▲ RECOVERED"), h("span", {}, "● other event"),
      h("span", {}, "| SEALED checkpoint"), h("span", {}, "shaded: work lost since the last seal"),
      m.pauses.length ? h("span", {}, "dotted: paused while Slurm held its own requeue") : null,
      h("span", {}, `lanes: ${m.lanes.join(", ")}`)));
    parts.recoveries.replaceChildren(...(m.recoveries.length ? m.recoveries.map((r) => h("div", { class: "recovery" },
      h("p", {}, `FAULT ${eventId(r.fault)} of attempt ${r.attempt - 1} → attempt ${r.attempt}: `,
        r.recovered ? `recovered in ${duration(r.recovered.time - (r.fault.evidence?.last_seen ?? r.fault.time))}` : "not recovered yet"),
      h("div", { class: "phases" }, r.phases.map((p) => h("div", { class: "phase", title: p.what },
        h("b", {}, p.name), p.seconds === null ? "not yet" : duration(p.seconds)))))) : [h("p", { class: "note" }, "No FAULT: nothing to recover.")]));
    parts.placements.replaceChildren(placements(story.events));
    parts.events.replaceChildren(eventTable(story.events, openEvent, showAll, () => { showAll = true; redraw(); }));
  };
  const queue = () => { if (!redrawQueued) { redrawQueued = true; requestAnimationFrame(redraw); } };
  // The run's seals come a page at a time.
  const allCheckpoints = async () => {
    const out = [];
    for (let after = 0; ;) {
      const page = await get(`${path}/checkpoints?after=${after}`);
      out.push(...page.checkpoints);
      if (page.next === null || page.next === undefined || page.checkpoints.length === 0) return out;
      // Each page must move on (a broker's answer is not trusted to end).
      if (!Number.isInteger(page.next) || page.next <= after || out.length > 1000000) throw new Error(`checkpoint pages do not move on (next ${page.next} after ${after})`);
      after = page.next;
    }
  };
  const refreshState = async () => {
    try {
      [view, detail, checkpoints] = await Promise.all([get(`/v1/views/runs/${encodeURIComponent(id)}`).then((v) => ({ ...v.run, broker: v.broker, receipts: v.receipts === true })),
        get(path), allCheckpoints()]);
      parts.workers.replaceChildren(workers(detail));
      parts.goodput.replaceChildren(goodputPanel(detail.goodput));
      parts.lineage.replaceChildren(lineage(checkpoints));
    } catch (e) {
      if (e.status === 404) { gone = true; page(`Run ${id}`, h("p", { class: "error", role: "alert", id: "run-missing" }, `Not found: ${e.message}`)); }
      throw e;
    }
  };
  (async () => {
    try {
      // The run's state and its events at once: two round trips, not four.
      const all = async () => {
        for (let after = 0; ;) {
          const page = (await get(`${path}/events?after=${after}&limit=${PAGE}`)).events;
          events.push(...page);
          if (page.length < PAGE) return;
          after = page[page.length - 1].id;
        }
      };
      await Promise.all([refreshState(), all(), refreshPolicy()]);
      loading = false;
      performance.mark("run-data");
      main.replaceChildren(h("h1", {}, `Run ${id}`), parts.summary, parts.live,
        h("h2", {}, "Timeline"), parts.timeline, parts.detail,
        h("h2", {}, "Recoveries: detect → place → start → first step"), parts.recoveries,
        h("h2", {}, "Goodput"), parts.goodput,
        h("h2", {}, "Workers"), parts.workers, h("h2", {}, "Placement reasons"), parts.placements,
        h("h2", {}, "Checkpoint lineage"), parts.lineage, h("h2", {}, "Checkpoint policy"), parts.policy,
        h("h2", {}, "Receipts"), parts.receipts, h("h2", {}, "Events"), parts.events);
      redraw();
      showPolicy();
      refreshReceipts();
      performance.mark("run-rendered");
      // A page opened in a background tab starts its stream when first shown.
      if (document.visibilityState === "hidden") parts.live.textContent = "Events: paused while this tab is hidden (resumed when shown, without a gap)";
      else startStream();
      document.addEventListener("visibilitychange", onVisibility);
    } catch (e) {
      if (!gone) main.replaceChildren(h("h1", {}, `Run ${id}`), errorBox(e));
    }
  })();
  // The stream holds one of the six connections a browser opens to a
  // broker (HTTP/1.1): a hidden tab gives its up and resumes after its last
  // event when shown again, so that many open run pages do not starve the
  // one being looked at.
  function startStream() {
    if (gone || stream) return;
    const last = events.length ? events[events.length - 1].id : 0;
    stream = follow(`${path}/events`, { after: last,
      onEvent: (ev) => {
        if (events.length && ev.id <= events[events.length - 1].id) return;   // had it
        events.push(ev);
        queue();
        if (ev.kind === "POLICY") refreshPolicy();
        clearTimeout(receiptsTimer);
        receiptsTimer = setTimeout(refreshReceipts, 300);   // an event may come with a receipt
        clearTimeout(timer);
        timer = setTimeout(() => refreshState().then(queue, () => {}), 300);   // the state moved on too
      },
      onStatus: (s) => { parts.live.textContent = `Events: ${s}`; } });
  }
  function onVisibility() {
    if (document.visibilityState === "hidden") {
      stream?.close();
      stream = null;
      parts.live.textContent = "Events: paused while this tab is hidden (resumed when shown, without a gap)";
    } else {
      startStream();
      refreshState().then(queue, () => {});
    }
  }
  const tick = setInterval(() => {
    if (gone || !view) return;
    refreshState().then(queue, () => {});
    refreshPolicy();
    refreshReceipts();
  }, 5000);
  // Zoom and a narrower window change the width in CSS pixels: the
  // timeline is drawn again to it, its text then stays readable.
  window.addEventListener("resize", queue);
  return () => {
    gone = true; stream?.close(); clearTimeout(timer); clearTimeout(receiptsTimer); clearInterval(tick);
    window.removeEventListener("resize", queue); document.removeEventListener("visibilitychange", onVisibility);
  };
}

function workers(d) {
  if (!d.workers.length) return h("p", { class: "note" }, "No worker has reported.");
  return h("div", { class: "table-wrap" }, h("table", { id: "workers-table" },
    h("thead", {}, h("tr", {}, ["Attempt", "Role", "Ranks", "Node", "Health", "Last step", "Last heartbeat"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, d.workers.map((w) => h("tr", {}, h("td", {}, w.attempt), h("td", {}, w.role), h("td", {}, w.ranks),
      h("td", {}, w.node), h("td", {}, state(w.health)), h("td", {}, w.step ?? "–"),
      h("td", {}, `${clock(w.last_seen)} (${duration(Date.now() / 1000 - w.last_seen)} ago)`))))));
}

// Why each cluster was or was not chosen: every PLACEMENT's cause, target
// and the clusters it rejected with their reasons.
function placements(events) {
  const ps = events.filter((e) => e.kind === "PLACEMENT");
  if (!ps.length) return h("p", { class: "note" }, "No placement yet (a run's first attempt is placed by its sbatch).");
  return h("ul", { id: "placement-list" }, ps.map((p) => {
    const e = p.evidence ?? {};
    return h("li", {}, h("b", {}, e.target ? `chosen: ${e.target}` : e.peer ? `handed to broker ${e.peer}` : "not placed"),
      e.nodes ? ` (nodes ${[].concat(e.nodes).join(", ")}${e.fabric ? `, fabric ${e.fabric}` : ""})` : "", ` — ${p.cause}`,
      (e.rejected ?? []).length ? h("ul", {}, e.rejected.map((r) => h("li", {}, `${r.cluster}: not chosen: ${r.reason}`))) : null,
      e.excluded ? h("div", { class: "note" }, `excluded node: ${e.excluded}; resumes from ${e.resume ?? "latest"}`) : null);
  }));
}

// The newest LINEAGE_SHOWN seals, newest first, each naming its parent.
const LINEAGE_SHOWN = 20;
function lineage(cps, all = false) {
  if (!cps.length) return h("p", { class: "note" }, "Nothing sealed yet.");
  const shown = all ? cps : cps.slice(-LINEAGE_SHOWN);
  const box = h("div");
  const more = h("button", { type: "button", onclick: () => box.replaceWith(lineage(cps, true)) }, `Show all ${cps.length}`);
  box.append(h("ol", { id: "lineage", reversed: true }, shown.slice().reverse().map((c) => h("li", {},
    `${c.name} ← ${c.parent ?? "(first)"}: attempt ${c.attempt}, ${c.ranks} ranks, sealed ${clock(c.sealed_at)}`))));
  // (Node.append writes a null as the text "null".)
  if (shown.length < cps.length) box.append(h("p", {}, `Newest ${shown.length} of ${cps.length} sealed checkpoints. `, more));
  return box;
}

// An event's id: a peer's (a moved run's story there) names its broker.
const eventId = (e) => (e.broker ? `${e.broker} #${e.id}` : `#${e.id}`);

// Where a moved run went and what became of it, as the peer last said.
function onwardText(o) {
  const there = o.run ? `: ${o.run.state}, attempt ${o.run.attempt}${o.run.cluster ? ` on ${o.run.cluster} (job ${o.run.job})` : ""}` : "";
  const when = o.as_of ? `, as broker ${o.broker} said at ${clock(o.as_of)}` : "";
  const trouble = o.status === "ok" ? "" : o.status === "asking" ? " (asking it now)" : ` (not read now: ${o.error ?? o.status})`;
  const omitted = o.omitted > 0 ? `; ${o.omitted} of its events there not shown` : "";
  return `broker ${o.broker}, attempt ${o.attempt} as job ${o.job}${there}${when}${trouble}${omitted}`;
}

function eventTable(events, open, all, showAll) {
  const shown = all ? events : events.slice(-EVENTS_SHOWN);
  const rows = shown.slice().reverse().map((e) => clickableRow([eventId(e), clock(e.time), h("td", {}, state(e.kind)), e.cause],
    () => open(e), `${e.kind} ${e.cause}`));
  return h("div", {}, shown.length < events.length
    ? h("p", {}, `Newest ${shown.length} of ${events.length} events. `, h("button", { type: "button", onclick: showAll }, "Show all")) : null,
  h("div", { class: "table-wrap" }, h("table", { id: "events-table" },
    h("thead", {}, h("tr", {}, ["Id", "Time", "Kind", "Cause"].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows))));
}
