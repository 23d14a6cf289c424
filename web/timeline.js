// The run's timeline as SVG: one lane per broker/cluster, each attempt a
// bar, seals as green ticks, events as points (a shape per kind, so that
// colour is never the only cue), the lost work shaded and labelled.
// Points are in the tab order; Enter or a click opens one (onOpen).
import { s, duration, clock } from "./dom.js";

const LEFT = 170, LANE = 56, TOP = 26, RIGHT = 20;
const SHAPES = { FAULT: "p-fault", PLACEMENT: "p-placement", RECOVERED: "p-recovered" };

export function draw(m, { width = 1000, onOpen }) {
  const w = Math.max(width, 480);
  const height = TOP + m.lanes.length * LANE + 24;
  const x = (t) => LEFT + ((t - m.t0) / (m.t1 - m.t0)) * (w - LEFT - RIGHT);
  const y = (lane) => TOP + m.lanes.indexOf(lane) * LANE;
  const svg = s("svg", { class: "timeline", id: "timeline", viewBox: `0 0 ${w} ${height}`, width: w, height, role: "group",
    "aria-label": `timeline: ${m.lanes.length} lane(s), ${m.bars.length} attempt(s), ${m.points.length} event(s), ${m.seals.length} seal(s)` });
  // Time axis: start, middle, end.
  for (const f of [0, 0.5, 1]) {
    const t = m.t0 + f * (m.t1 - m.t0);
    svg.append(s("text", { x: x(t), y: 14, "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle" }, clock(t)));
  }
  for (const lane of m.lanes) {
    svg.append(s("rect", { class: "lane-band", x: 0, y: y(lane), width: w, height: LANE - 6 }),
      s("text", { x: 6, y: y(lane) + 30, class: "lane-label", "data-lane": lane }, lane));
  }
  for (const b of m.bars) {
    const r = s("rect", { class: `bar${b.ended ? " ended" : ""}`, x: x(b.start), y: y(b.lane) + 18, height: 18,
      width: Math.max(2, x(b.end) - x(b.start)), "data-attempt": b.attempt },
    s("title", {}, `attempt ${b.attempt} on ${b.lane}: ${duration(b.end - b.start)}${b.ended ? "" : " (running)"}`));
    svg.append(r, s("text", { x: x(b.start) + 3, y: y(b.lane) + 31 }, `attempt ${b.attempt}`));
  }
  for (const p of m.pauses ?? []) {
    svg.append(s("rect", { class: "pause", x: x(p.from), y: y(p.lane) + 18, height: 18, width: Math.max(3, x(p.to) - x(p.from)) },
      s("title", {}, `paused ${duration(p.to - p.from)}: Slurm requeued job ${p.ev.evidence?.job ?? ""} itself${p.open ? " (waiting for Slurm to start it again)" : ", then started it again"}`)),
    s("text", { x: x(p.from) + 3, y: y(p.lane) + 50, class: "pause-label" }, `paused ${duration(p.to - p.from)}`));
  }
  for (const l of m.lost) {
    svg.append(s("rect", { class: "lost", x: x(l.from), y: y(l.lane) + 14, height: 26, width: Math.max(3, x(l.to) - x(l.from)) },
      s("title", {}, `work lost: ${duration(l.to - l.from)} since ${l.seal ? `the last seal (${l.seal.evidence?.checkpoint ?? ""})` : "the start (nothing sealed)"}`)),
    s("text", { x: x(l.from), y: y(l.lane) + 50, class: "lost-label" }, `lost ${duration(l.to - l.from)}`));
  }
  for (const k of m.seals)
    svg.append(s("rect", { class: "seal", x: x(k.time) - 1, y: y(k.lane) + 12, width: 3, height: 30 },
      s("title", {}, `SEALED ${k.name} at ${clock(k.time)}`)));
  // Points: one listener on the whole drawing (thousands of points each
  // with its own were most of a 2,000-event page's render); the label is
  // both the accessible name and, on hover, the title.
  const byId = new Map();
  for (const p of m.points) {
    const cx = x(p.ev.time), cy = y(p.lane) + 10, cls = `point ${SHAPES[p.ev.kind] ?? "p-other"}`;
    const label = `${p.ev.kind} at ${clock(p.ev.time)}: ${p.ev.cause}`;
    // A peer's event (a moved run's story there) has ids of its own broker's.
    const key = `${p.ev.broker ?? ""}#${p.ev.id}`;
    const attrs = { class: cls, tabindex: 0, role: "button", "aria-label": label, "data-kind": p.ev.kind, "data-id": key };
    let shape;
    if (p.ev.kind === "FAULT") shape = s("rect", { ...attrs, x: cx - 6, y: cy - 6, width: 12, height: 12 });
    else if (p.ev.kind === "PLACEMENT") shape = s("polygon", { ...attrs, points: `${cx},${cy - 7} ${cx + 7},${cy} ${cx},${cy + 7} ${cx - 7},${cy}` });
    else if (p.ev.kind === "RECOVERED") shape = s("polygon", { ...attrs, points: `${cx},${cy - 7} ${cx + 7},${cy + 6} ${cx - 7},${cy + 6}` });
    else shape = s("circle", { ...attrs, cx, cy, r: 4 });
    byId.set(key, p.ev);
    svg.append(shape);
  }
  const opened = (e) => byId.get(e.target.closest?.(".point")?.dataset.id ?? "");
  svg.addEventListener("click", (e) => { const ev = opened(e); if (ev) onOpen(ev); });
  svg.addEventListener("keydown", (e) => {
    const ev = opened(e);
    if (ev && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); onOpen(ev); }
  });
  svg.addEventListener("mouseover", (e) => {
    const el = e.target.closest?.(".point");
    if (el && !el.firstChild) el.append(s("title", {}, el.getAttribute("aria-label")));
  });
  return svg;
}
