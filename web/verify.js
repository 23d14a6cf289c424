// Receipts checked in the browser with WebCrypto, as `shard verify` checks
// them (doc/receipts.md): each envelope's Ed25519 signature over DSSE's PAE
// against the broker's keys (GET /v1/keys), its in-toto Statement, the
// run's chain (seq without gaps, each "previous" the SHA-256 of its
// predecessor's envelope bytes) and each receipt's inclusion in the log's
// signed head (RFC 9162 2.1.3.2). Pure: no DOM, also run by node --test.
const subtle = globalThis.crypto.subtle;
const enc = new TextEncoder();

export const STATEMENT_TYPE = "application/vnd.in-toto+json";
export const HEAD_TYPE = "application/vnd.shardnet.treehead+json";

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function unhex(s) {
  if (typeof s !== "string" || !/^([0-9a-f]{2})*$/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// Standard or URL-safe base64, padded or not (DSSE accepts both) -> bytes, or null.
export function b64decode(s) {
  if (typeof s !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(s)) return null;
  const std = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (std.length % 4 === 1) return null;
  const bin = atob(std + "=".repeat((4 - (std.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

export const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
};

export async function sha256(bytes) {
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

// The envelope's bytes as the broker wrote them: one JSON text, keys
// sorted, no white space (doc/receipts.md, "The envelope's bytes").
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}
export const envelopeBytes = (env) => enc.encode(canonical(env));

// DSSE's pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
export function pae(type, body) {
  const t = enc.encode(type);
  return concat(enc.encode(`DSSEv1 ${t.length} `), t, enc.encode(` ${body.length} `), body);
}

// RFC 9162 2.1: leaf = SHA-256(0x00 || data), node = SHA-256(0x01 || left || right).
export const leafHash = (data) => sha256(concat(Uint8Array.of(0), data));
export const nodeHash = (l, r) => sha256(concat(Uint8Array.of(1), l, r));

// RFC 9162 2.1.3.2: does PATH show leaf (its hash) at index in the tree of
// size tree_size whose root is root? Indices are numbers (below 2^53).
export async function verifyInclusion(index, size, leaf, path, root) {
  if (!(index >= 0 && index < size)) return false;
  let fn = index, sn = size - 1, r = leaf;
  const odd = (x) => x % 2 === 1, half = (x) => Math.floor(x / 2);
  for (const p of path) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      r = await nodeHash(p, r);
      if (!odd(fn)) while (!odd(fn) && fn !== 0) { fn = half(fn); sn = half(sn); }
    } else {
      r = await nodeHash(r, p);
    }
    fn = half(fn); sn = half(sn);
  }
  return sn === 0 && hex(r) === hex(root);
}

// PEM -> DER bytes of the SubjectPublicKeyInfo.
export function pemBody(pem) {
  const m = /-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----/.exec(pem ?? "");
  return m ? b64decode(m[1].replace(/\s+/g, "")) : null;
}

// The broker's keys, imported: {keys: Map(keyid -> CryptoKey), ed25519:
// whether this browser's WebCrypto verifies Ed25519, problems: [text],
// until: Map(keyid -> valid_until) of retired keys}. A key is filed under
// the SHA-256 of its DER (its keyid); a listed keyid that is not that is a
// problem, never trusted.
export async function importKeys(listed) {
  const keys = new Map(), problems = [], until = new Map();
  let ed25519 = true;
  for (const k of listed ?? []) {
    const der = pemBody(k.pem);
    if (!der) { problems.push(`key ${k.keyid}: its PEM is not a public key`); continue; }
    const id = hex(await sha256(der));
    if (id !== k.keyid) problems.push(`key listed as ${k.keyid} hashes to ${id}`);
    else if (k.valid_until !== null && k.valid_until !== undefined) until.set(id, k.valid_until);
    try {
      keys.set(id, await subtle.importKey("spki", der, { name: "Ed25519" }, false, ["verify"]));
    } catch (e) {
      if (e.name === "NotSupportedError") ed25519 = false;
      else problems.push(`key ${id}: not an Ed25519 public key (${e.message})`);
    }
  }
  return { keys, ed25519, problems, until };
}

// A retired key signs nothing later: {ok, text} for a receipt of that time
// signed by a key with a valid_until, null when the key has none (current).
// A valid_until that is no time refuses, as `shard verify` does.
export function checkKeyValidity(env, time, keyring) {
  const s = (Array.isArray(env?.signatures) ? env.signatures : []).find((x) => keyring.keys.has(x.keyid));
  const until = s && keyring.until?.get(s.keyid);
  if (until === undefined || until === null || !s) return null;
  const t = Date.parse(time), u = typeof until === "string" ? Date.parse(until) : NaN;
  if (!Number.isNaN(t) && !Number.isNaN(u) && t <= u) return { ok: true, text: `signed before its key's valid_until ${until}` };
  return { ok: false, text: `signed by key ${s.keyid} at ${time}, after the key's valid_until ${until} (a retired key signs nothing later)` };
}

// One envelope's signature: {ok: true|false|null (not checked), text}.
export async function checkSignature(env, payload, keyring) {
  const sigs = Array.isArray(env?.signatures) ? env.signatures : [];
  if (!sigs.length) return { ok: false, text: "no signature" };
  if (!keyring.ed25519) return { ok: null, text: "not checked here: this browser's WebCrypto has no Ed25519 (`shard verify` checks it)" };
  const data = pae(String(env.payloadType ?? ""), payload);
  const names = [];
  for (const s of sigs) {
    const key = keyring.keys.get(s.keyid), sig = b64decode(s.sig);
    names.push(s.keyid);
    if (!key) continue;
    if (sig && sig.length === 64 && (await subtle.verify({ name: "Ed25519" }, key, sig, data))) return { ok: true, text: `signed by key ${s.keyid.slice(0, 16)}…` };
    return { ok: false, text: `bad signature by key ${s.keyid} (payload or signature altered)` };
  }
  return { ok: false, text: `signed by unknown key ${names.join(", ")}` };
}

// The log's signed head -> {ok, text, size, root (bytes)}.
export async function checkHead(answer, keyring) {
  const env = answer?.head;
  const payload = b64decode(env?.payload);
  let p = null;
  try { p = payload && JSON.parse(new TextDecoder().decode(payload)); } catch { /* said below */ }
  if (!p || env.payloadType !== HEAD_TYPE || !Number.isSafeInteger(p.tree_size) || !unhex(p.root_hash) || p.root_hash.length !== 64)
    return { ok: false, text: "the log head is not a signed tree head" };
  const sig = await checkSignature(env, payload, keyring);
  const out = { ok: sig.ok, size: p.tree_size, root: unhex(p.root_hash), timestamp: p.timestamp };
  if (p.tree_size !== answer.tree_size || p.root_hash !== answer.root_hash)
    return { ...out, ok: false, text: "the head's signed size or root is not the one the broker lists" };
  out.text = sig.ok === false ? `the log head: ${sig.text}` : `log head of size ${p.tree_size}, ${sig.ok ? "signature verified" : "signature not checked here"}`;
  return out;
}

// What a receipt says, decoded: {statement, predicate} or {error}.
export function readStatement(env, payload, listed, run) {
  if (env?.payloadType !== STATEMENT_TYPE) return { error: `payload type ${env?.payloadType} is not ${STATEMENT_TYPE}` };
  let st;
  try { st = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload)); } catch { return { error: "the payload is not JSON" }; }
  const p = st?.predicate;
  if (st?._type !== "https://in-toto.io/Statement/v1" || st?.predicateType !== "https://shardnet.dev/receipt/v1" || !p || typeof p !== "object")
    return { error: "not a ShardNet receipt Statement (in-toto v1, predicateType https://shardnet.dev/receipt/v1)" };
  if (!Array.isArray(st.subject) || !st.subject.length) return { error: "the Statement has no subject" };
  if (p.run !== run) return { error: `it is a receipt of run ${p.run}, listed for run ${run}` };
  if (p.seq !== listed.seq) return { error: `it says seq ${p.seq}, listed as seq ${listed.seq}` };
  if (p.kind !== listed.kind) return { error: `it says kind ${p.kind}, listed as ${listed.kind}` };
  if (!(p.previous === null || (typeof p.previous === "string" && unhex(p.previous) && p.previous.length === 64)))
    return { error: "previous is neither null nor a SHA-256" };
  return { statement: st, predicate: p };
}

// Every receipt of a run, in the order the broker lists them:
// [{seq, kind, time, predicate, statement, digest, state: "verified"|"failed",
//   checks: [{name, ok: true|false|null, text}]}]. proof(index, size) ->
// the broker's inclusion answer ({leaf_hash, path}); head from checkHead
// (or null: no log check). known: the results of a prefix of listed,
// verified before (a page that follows a run checks only what is new).
export async function verifyReceipts(run, listed, keyring, head, proof, known = []) {
  const out = known.slice(0, listed.length);
  let prev = out.length ? { seq: out[out.length - 1].seq, digest: out[out.length - 1].digest } : null;   // the previous listed receipt's
  for (const r of listed.slice(out.length)) {
    const env = r.envelope, checks = [];
    const bytes = envelopeBytes(env), digest = hex(await sha256(bytes));
    const payload = b64decode(env?.payload) ?? new Uint8Array();
    const sig = await checkSignature(env, payload, keyring);
    checks.push({ name: "signature", ...sig });
    const st = readStatement(env, payload, r, run);
    checks.push({ name: "statement", ok: !st.error, text: st.error ?? "an in-toto Statement of this run, seq and kind as listed" });
    const validity = st.predicate && sig.ok !== false ? checkKeyValidity(env, st.predicate.time, keyring) : null;
    if (validity) checks.push({ name: "key", ...validity });
    // The chain: seq 1 has no previous; seq N names seq N-1's digest.
    let chain;
    const p = st.predicate;
    if (!p) chain = { ok: null, text: "not checked (the Statement is unreadable)" };
    else if (prev && r.seq <= prev.seq) chain = { ok: false, text: `out of order: listed after seq ${prev.seq} (receipts swapped?)` };
    else if (r.seq === 1) chain = p.previous === null ? { ok: true, text: "the first receipt (no previous)" } : { ok: false, text: "seq 1 names a previous receipt" };
    else if (p.previous === null) chain = { ok: false, text: `seq ${r.seq} has no previous` };
    else if (!prev && r.seq > 1) chain = { ok: null, text: `continues seq ${r.seq - 1}, which this broker does not list (signed by the broker the run came from: \`shard verify\` checks that link)` };
    else if (prev.seq !== r.seq - 1) chain = { ok: false, text: `missing predecessor: no receipt with seq ${r.seq - 1}` };
    else if (p.previous !== prev.digest) chain = { ok: false, text: `missing predecessor: previous is ${p.previous}, but receipt seq ${prev.seq} here has digest ${prev.digest}` };
    else chain = { ok: true, text: `previous = SHA-256 of seq ${prev.seq}'s envelope` };
    checks.push({ name: "chain", ...chain });
    if (r.digest && r.digest !== digest) checks.push({ name: "digest", ok: false, text: `the broker lists digest ${r.digest}, the envelope's bytes hash to ${digest}` });
    // The log: this envelope's leaf, up its path, is the signed head's root.
    if (!head || head.ok === false) checks.push({ name: "log", ok: null, text: head ? `not checked: ${head.text}` : "not checked: no log head" });
    else if (!(Number.isSafeInteger(r.log_index) && r.log_index < head.size)) checks.push({ name: "log", ok: false, text: `not shown to be in the log head (its index ${r.log_index}, the head's size ${head.size})` });
    else {
      try {
        const pr = await proof(r.log_index, head.size);
        const path = (pr.path ?? []).map(unhex);
        const leaf = await leafHash(bytes);
        const ok = !path.includes(null) && (await verifyInclusion(r.log_index, head.size, leaf, path, head.root));
        checks.push({ name: "log", ok, text: ok ? `leaf ${r.log_index} of the signed head of size ${head.size} (RFC 9162 inclusion proof)`
          : `not in the log: its inclusion proof against the head of size ${head.size} fails` });
      } catch (e) {
        checks.push({ name: "log", ok: null, text: `not checked: the inclusion proof was not read (${e.message})` });
      }
    }
    prev = { seq: r.seq, digest };
    out.push({ seq: r.seq, kind: r.kind, time: r.time, attempt: r.attempt, digest, predicate: p ?? null, statement: st.statement ?? null,
      checks, state: checks.some((c) => c.ok === false) ? "failed" : "verified" });
  }
  return out;
}

// What a receipt attests, in a line (from its signed predicate).
export function attests(v) {
  const p = v.predicate;
  if (!p) return "unreadable";
  const b = p.body ?? {};
  if (p.kind === "attempt-started")
    return `attempt ${p.attempt} started on ${b.cluster ?? "?"}, job ${b.job ?? "?"}` +
      (Array.isArray(b.nodes) && b.nodes.length ? `, nodes ${b.nodes.map((n) => n?.name ?? n).join(", ")}` : "") +
      (b.owner?.user ? `, owner ${b.owner.user}` : "") +
      (b.ranks && typeof b.ranks === "object" && Object.keys(b.ranks).length ? `, ${Object.keys(b.ranks).length} of ${b.world_size ?? "?"} ranks reported` : "") +
      (Array.isArray(b.environment) && b.environment[0] && typeof b.environment[0] === "object"
        ? "; " + ["torch", "python", "cuda", "nccl", "driver"].filter((k) => typeof b.environment[0][k] === "string")
          .map((k) => `${k} ${b.environment[0][k]}`).join(", ")
        : "");
  if (p.kind === "checkpoint-sealed") {
    // A seal commits its files as one Merkle root (body.files); an older one lists them as subjects.
    const list = b.files && typeof b.files === "object" && typeof b.files.merkle_root === "string" ? b.files : null;
    const n = list ? list.count : v.statement?.subject?.length ?? 0;
    return `checkpoint ${b.checkpoint} sealed${b.step !== undefined ? ` at step ${b.step}` : ""} (parent ${b.parent ?? "none"}), ${n} file${n === 1 ? "" : "s"} with SHA-256` +
      (list ? ` under Merkle root ${list.merkle_root.slice(0, 16)}…` : "") + (b.ranks ? `, ${b.ranks} rank${b.ranks === 1 ? "" : "s"}` : "");
  }
  if (p.kind === "attempt-ended")
    return `attempt ${p.attempt} ended: ${b.how ?? "?"}` + (b.cause ? ` (${typeof b.cause === "string" ? b.cause : JSON.stringify(b.cause)})` : "") +
      (b.moved_to ? `, moved to broker ${b.moved_to}` : "");
  if (p.kind === "run-ended") return `run ended ${b.state ?? "?"}`;
  return p.kind;
}
