// A run's history as the timeline draws it, derived from its events alone
// (and the attempts' clusters from GET /v1/views/runs/ID): which attempt
// ran where and when, the seals, the work lost at each FAULT, and each
// recovery's phases. What the broker writes (broker/detector/faults.cpp,
// broker/recovery/requeue.cpp, broker/detector/heartbeats.cpp):
//   FAULT      evidence {attempt, node, last_seen, silent_for, last_step?, job?}
//   PLACEMENT  evidence {decision: "B:RUN/attempt-N", from_cluster, target?, nodes?, fabric?, peer?, rejected: [{cluster, reason}]}
//   RECOVERING the same evidence, once the new attempt's job is submitted
//   ATTEMPT    evidence {attempt}: the new attempt's first heartbeat (RUNNING for attempt 1)
//   RECOVERED  evidence {attempt, nodes}: every node of the new attempt heartbeats
//   SEALED     evidence {checkpoint, attempt, ranks, parent}
//   REQUEUED   evidence {attempt, job, restarts}: Slurm requeued the job itself (the attempt pauses)
//   RESUMED    evidence {attempt, job, nodes}: Slurm started it again (the pause ends)
const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

// The attempt a decision's id names ("alpha:r1/attempt-2" -> 2).
export function decisionAttempt(ev) {
  const m = /\/attempt-(\d+)$/.exec(ev.evidence?.decision ?? "");
  return m ? Number(m[1]) : null;
}

function evAttempt(ev) {
  const a = ev.evidence?.attempt;
  if (Number.isInteger(a)) return a;
  return ev.kind === "PLACEMENT" || ev.kind === "RECOVERING" || ev.kind === "MOVED" ? decisionAttempt(ev) : null;
}

// A run this broker moved to a peer, with its story there (the view's
// "onward": the peer's attempts and events): one history, in time order,
// each of the peer's events marked with its broker. The peer's FINAL and
// ATTEMPT events end and start its attempts as this broker's would.
export function withOnward(events, attempts, onward) {
  if (!onward?.events?.length && !onward?.run?.attempts?.length) return { events, attempts };
  const peer = onward.broker;
  const theirs = (onward.events ?? []).map((e) => ({ ...e, broker: peer }));
  const all = [...events, ...theirs].sort((a, b) => a.time - b.time);
  const mine = new Set(attempts.map((a) => a.attempt));
  const more = (onward.run?.attempts ?? []).filter((a) => !mine.has(a.attempt)).map((a) => ({ ...a, broker: peer }));
  return { events: all, attempts: [...attempts, ...more] };
}

// model(events, {attempts, broker, now, state}) -> {t0, t1, lanes, bars, seals, points, lost, recoveries, pauses}
// An attempt or event with its own "broker" (a peer's, withOnward) takes
// its lane from that broker.
export function model(events, { attempts = [], broker = "", now = Date.now() / 1000, state = "" } = {}) {
  const where = new Map();   // attempt -> lane label
  const on = (cluster, b = broker) => (b ? `${b} / ${cluster}` : cluster);
  for (const a of attempts) where.set(a.attempt, on(a.cluster, a.broker ?? broker));
  const starts = new Map();  // attempt -> its start time
  const ends = new Map();
  let current = 1;
  const at = [];             // each event's attempt
  for (const ev of events) {
    let a = evAttempt(ev);
    const e = ev.evidence ?? {};
    if ((ev.kind === "PLACEMENT" || ev.kind === "RECOVERING") && a) {
      const b = ev.broker ?? broker;
      if (e.target && !where.has(a)) where.set(a, on(e.target, b));
      if (e.peer && !e.target && !where.has(a)) where.set(a, `broker ${e.peer}`);
      if (e.from_cluster && !where.has(a - 1)) where.set(a - 1, on(e.from_cluster, b));
      if ((e.new_job || e.peer || ev.kind === "RECOVERING") && !starts.has(a)) starts.set(a, ev.time);
    }
    if (ev.kind === "MOVED" && a && !starts.has(a)) starts.set(a, ev.time);
    if (a === null) a = current;
    if ((ev.kind === "ATTEMPT" || ev.kind === "RUNNING") && !starts.has(a)) starts.set(a, ev.time);
    if (ev.kind === "PENDING" && !starts.has(1)) starts.set(1, ev.time);
    if (a > current && ev.kind !== "PLACEMENT") current = a;
    if (ev.kind === "FAULT" && !ends.has(a)) ends.set(a, ev.time);
    if (FINAL.has(ev.kind)) ends.set(a, ev.time);
    at.push(a);
  }
  const t0 = events.length ? events[0].time : now;
  const last = events.length ? events[events.length - 1].time : now;
  const live = !FINAL.has(state);
  const t1 = Math.max(live ? now : last, t0 + 1);
  const numbers = [...new Set([...starts.keys(), ...where.keys(), ...at])].sort((x, y) => x - y);
  const laneOf = (a) => where.get(a) ?? (broker ? `${broker} / cluster not recorded` : "cluster not recorded");
  const lanes = [...new Set(numbers.map(laneOf))];
  const bars = numbers.map((a, i) => {
    const start = starts.get(a) ?? t0;
    const next = numbers[i + 1] !== undefined ? starts.get(numbers[i + 1]) : undefined;
    const end = ends.get(a) ?? next ?? t1;
    return { attempt: a, lane: laneOf(a), start, end, ended: ends.has(a) || next !== undefined || !live };
  });
  const seals = [], points = [], lost = [], recoveries = [], pauses = [];
  let lastSeal = null;
  events.forEach((ev, i) => {
    const lane = laneOf(at[i]);
    // Slurm's own requeue: the attempt waits (Slurm holds the job) until RESUMED.
    if (ev.kind === "REQUEUED") pauses.push({ attempt: at[i], lane, from: ev.time, to: null, ev });
    if (ev.kind === "RESUMED") {
      const open = pauses.findLast((p) => p.attempt === at[i] && p.to === null);
      if (open) open.to = ev.time;
    }
    if (ev.kind === "SEALED") {
      seals.push({ ev, lane, time: ev.time, name: ev.evidence?.checkpoint ?? ev.cause });
      lastSeal = ev;
      return;
    }
    points.push({ ev, lane, attempt: at[i] });
    if (ev.kind !== "FAULT") return;
    // The work since the last seal is done again: from that seal (or the
    // start) to the last heartbeat before the silence.
    const bar = bars.find((b) => b.attempt === at[i]);
    const from = lastSeal ? lastSeal.time : bars[0]?.start ?? t0;
    const to = ev.evidence?.last_seen ?? ev.time;
    lost.push({ fault: ev, lane: bar?.lane ?? lane, from, to: Math.max(from, to), seal: lastSeal });
    recoveries.push(recovery(events, i, at[i]));
  });
  for (const p of pauses) {
    if (p.to !== null) continue;
    const bar = bars.find((b) => b.attempt === p.attempt);
    p.to = bar?.ended ? bar.end : t1;   // still waiting (or its attempt ended first)
    p.open = !bar?.ended;
  }
  return { t0, t1, lanes, bars, seals, points, lost, recoveries, pauses };
}

// detect -> place -> start -> first step of the recovery from the FAULT at
// events[i] (attempt a): seconds each, null while it has not happened.
function recovery(events, i, a) {
  const fault = events[i];
  const next = a + 1;
  let placement = null, started = null, recovered = null;
  // Forward from the FAULT until all three are found or the next attempt
  // fails too: one pass per recovery, not a copy of the rest of the run.
  for (let j = i + 1; j < events.length && !(placement && started && recovered); j++) {
    const ev = events[j], e = ev.evidence ?? {};
    if (ev.kind === "FAULT" && e.attempt >= next) break;
    if (!placement && ev.kind === "PLACEMENT" && decisionAttempt(ev) === next && (e.new_job || e.peer)) placement = ev;
    else if (!started && (ev.kind === "ATTEMPT" || ev.kind === "RUNNING") && e.attempt === next) started = ev;
    else if (!recovered && ev.kind === "RECOVERED" && e.attempt === next) recovered = ev;
  }
  const seen = fault.evidence?.last_seen;
  const gap = (x, y) => (x && y ? y.time - x.time : null);
  return {
    fault, placement, started, recovered, attempt: next,
    phases: [
      { name: "detect", seconds: seen ? fault.time - seen : null, what: "last heartbeat → FAULT (deadline, then Slurm confirms)" },
      { name: "place", seconds: gap(fault, placement), what: "FAULT → PLACEMENT (decision, capacity, sbatch)" },
      { name: "start", seconds: gap(placement, started), what: "PLACEMENT → the new attempt's first heartbeat (queue, node start-up)" },
      { name: "first step", seconds: gap(started ?? placement, recovered), what: "first heartbeat → RECOVERED (every node reports its step)" },
    ],
  };
}
