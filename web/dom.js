// Building the page without innerHTML: every value from the broker is
// text, never markup (a run id or an event's cause cannot inject script).

// h("td", {class: "x", onclick: f}, "text", child...) -> an element.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// The same in SVG's namespace (the timeline).
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Seconds as people read them: 42 s, 3 min 5 s, 2 h 10 min, 3 d 4 h.
export function duration(sec) {
  if (sec === null || sec === undefined || !isFinite(sec)) return "–";
  const v = Math.max(0, sec);
  if (v < 10) return `${v.toFixed(1)} s`;
  if (v < 60) return `${Math.round(v)} s`;
  if (v < 3600) return `${Math.floor(v / 60)} min ${Math.round(v % 60)} s`;
  if (v < 86400) return `${Math.floor(v / 3600)} h ${Math.round((v % 3600) / 60)} min`;
  return `${Math.floor(v / 86400)} d ${Math.round((v % 86400) / 3600)} h`;
}

// A broker time (seconds since the epoch) as local date and time. One
// formatter for all: toLocaleString makes a new one per call, and a run
// page formats thousands of times (it was most of a 2,000-event render).
const CLOCK = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium", hour12: false });
export function clock(t) {
  if (!t) return "–";
  return CLOCK.format(new Date(t * 1000));
}

// A state's family, for its shape and colour (the word is always shown).
const FAMILY = {
  RUNNING: "ok", SUCCEEDED: "ok", verified: "ok", failed: "bad", RECOVERED: "ok", SEALED: "ok", ok: "ok", healthy: "ok",
  PENDING: "idle", CANCELLED: "idle", ended: "idle", ATTEMPT: "idle", REQUEUED: "idle", RESUMED: "idle", POLICY: "idle", MOVED: "idle", RECEIVED: "idle", DELIVERY: "idle",
  RECOVERING: "warn", DEGRADED: "warn", PLACEMENT: "warn", late: "warn", suspect: "warn",
  FAILED: "bad", FAULT: "bad", faulted: "bad",
  unknown: "unknown",
};
export function state(word) {
  return h("span", { class: `state s-${FAMILY[word] ?? "unknown"}` }, word ?? "unknown");
}

// A table whose rows open with Enter or a click (they are in the tab order).
export function clickableRow(cells, open, label) {
  const tr = h("tr", { class: "clickable", tabindex: 0, "aria-label": label,
    onclick: open, onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } } });
  for (const c of cells) tr.append(c instanceof Node && c.tagName === "TD" ? c : h("td", {}, c));
  return tr;
}

// Replaces main's content and says what the page is (for screen readers too).
export function page(title, ...content) {
  const main = document.getElementById("main");
  document.title = `${title} · ShardNet`;
  main.replaceChildren(h("h1", {}, title), ...content);
  return main;
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, err.message ?? String(err));
}
