// A run's receipts (GET /v1/runs/ID/receipts) and each one's verification
// state, computed here in the browser (verify.js): the signature against
// GET /v1/keys, the Statement, the chain, and inclusion in the signed log
// head (the receipts' pages with proofs=1; /v1/log/proof/inclusion for one
// logged after that head).
import { h, state, clock } from "./dom.js";
import { get } from "./api.js";
import { importKeys, checkHead, verifyReceipts, attests, canonical } from "./verify.js";

const PROOFS_AT_ONCE = 3;   // of the six connections a page has to its broker; one is the event stream

// loadReceipts(run) -> {receipts: [...verified], head, keyring} or {off: true}.
// last: the previous answer, whose verification is kept when nothing changed.
// Receipts verified before whose envelopes are the same are kept as they
// were (their log check names the head they were checked against); only
// the new ones are checked, against the current head.
export async function loadReceipts(run, last = null) {
  const listed = (await pages(run, false, 0)).receipts;
  const texts = listed.map((r) => canonical(r.envelope));
  let same = 0;
  while (last && same < texts.length && same < last.texts.length && texts[same] === last.texts[same]) same++;
  if (last && same === texts.length && same === last.texts.length) return last;
  const known = last && same === last.texts.length ? last.receipts : [];
  // The new receipts again, each with its inclusion proof against one signed
  // head (a request per thousand, not per receipt); one the broker logged
  // after that head, or listed between the two reads, asks for its own.
  const after = known.length ? listed[known.length - 1].seq : 0;
  const [keys, fresh] = await Promise.all([last?.keyring ?? get("/v1/keys").then((k) => importKeys(k.keys)), pages(run, true, after)]);
  const head = await checkHead(fresh.log ?? (await get("/v1/log/head")), keys);
  const embedded = new Map(fresh.receipts.filter((r) => r.inclusion).map((r) => [r.log_index, r.inclusion]));
  // The other proofs, a few at a time, asked before they are needed in order.
  const asked = new Map();
  let running = 0;
  const queue = [];
  const next = () => { while (running < PROOFS_AT_ONCE && queue.length) { running++; queue.shift()(); } };
  const proof = (index, size) => {
    if (size === fresh.log?.tree_size && embedded.has(index)) return Promise.resolve(embedded.get(index));
    if (!asked.has(index))
      asked.set(index, new Promise((res, rej) => {
        queue.push(() => get(`/v1/log/proof/inclusion?index=${index}&size=${size}`).then(res, rej).finally(() => { running--; next(); }));
        next();
      }));
    return asked.get(index);
  };
  if (head.ok !== false) for (const r of listed.slice(known.length)) if (r.log_index < head.size) proof(r.log_index, head.size).catch(() => {});
  const receipts = await verifyReceipts(run, listed, keys, head, proof, known);
  return { texts, keyring: keys, head, receipts };
}

// Every receipt of run after seq `after`, page by page (GET
// /v1/runs/ID/receipts); with proofs, each with its inclusion proof against
// the first page's head: {receipts, log}.
async function pages(run, proofs, after) {
  const out = { receipts: [], log: null };
  for (let size = 0; ;) {
    const q = new URLSearchParams();
    if (proofs) q.set("proofs", "1");
    if (after) q.set("after", String(after));
    if (size) q.set("size", String(size));
    const qs = q.toString();
    const page = await get(`/v1/runs/${encodeURIComponent(run)}/receipts${qs ? `?${qs}` : ""}`);
    if (proofs && !out.log && page.log) { out.log = page.log; size = page.log.tree_size; }
    out.receipts.push(...page.receipts);
    if (!Number.isSafeInteger(page.next_after) || page.next_after <= after || !page.receipts.length) return out;
    after = page.next_after;
  }
}

function checksDone(v) {
  const sig = v.keyring.ed25519
    ? "each receipt's Ed25519 signature over DSSE's PAE against the broker's keys (GET /v1/keys; a key's id is the SHA-256 of its DER, checked too), none signed after its key's valid_until"
    : "not the signatures: this browser's WebCrypto has no Ed25519 (`shard verify RUN` checks them)";
  return [
    `Checked in this browser: ${sig};`,
    " the in-toto Statement (type, run, seq, kind);",
    " the chain (seq 1, 2, … without a gap, each receipt's previous = the SHA-256 of its predecessor's envelope bytes);",
    ` inclusion in the broker's log (RFC 9162 inclusion proof of each envelope's leaf against the ${v.head.ok === false ? "log head, which failed" : "signed head"}: ${v.head.text}).`,
    " Not checked here: the checkpoint files' digests on disk (`shard verify RUN --checkpoint-dir DIR`) and that the log only grew (`--head`).",
  ].join("");
}

export function receiptsPanel(v) {
  if (!v) return h("p", { class: "note" }, "Loading receipts…");
  if (v.off) return h("p", { class: "note", id: "receipts-off" }, "This broker signs no receipts (its config has no \"receipts\" section).");
  if (v.error) return h("p", { class: "error", id: "receipts-error" }, `Receipts not read: ${v.error}`);
  const failed = v.receipts.filter((r) => r.state === "failed").length;
  const summary = !v.receipts.length ? "No receipt yet."
    : failed ? `${failed} of ${v.receipts.length} receipts FAILED verification.` : `All ${v.receipts.length} receipts verified.`;
  return h("div", { id: "receipts" },
    h("p", { id: "receipts-summary" }, state(failed ? "FAILED" : "verified"), " ", summary),
    h("p", { class: "note", id: "receipts-checks" }, checksDone(v)),
    v.keyring.problems.length ? h("ul", { class: "error" }, v.keyring.problems.map((p) => h("li", {}, p))) : null,
    v.receipts.length ? h("div", { class: "table-wrap" }, h("table", { id: "receipts-table" },
      h("thead", {}, h("tr", {}, ["Seq", "Kind", "Time", "Attests", "Verification"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, v.receipts.map((r) => h("tr", { "data-seq": r.seq, "data-state": r.state },
        h("td", {}, r.seq), h("td", {}, r.kind), h("td", {}, r.time ? clock(Date.parse(r.time) / 1000) : "–"), h("td", {}, attests(r)),
        h("td", {}, state(r.state), h("ul", { class: "checks" }, r.checks.map((c) => h("li", { "data-check": c.name, "data-ok": String(c.ok) },
          h("b", {}, `${c.name}: `), c.ok === true ? "ok — " : c.ok === false ? "FAILED — " : "not checked — ", c.text))))))))) : null);
}
