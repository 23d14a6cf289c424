// The broker's API as the signed-in token sees it. The token lives in
// sessionStorage (gone with the tab) and goes as a bearer header; the
// static page itself needs none.
const KEY = "shardnet.token";

export const session = {
  token: () => sessionStorage.getItem(KEY) ?? "",
  signIn: (t) => sessionStorage.setItem(KEY, t),
  signOut: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${session.token()}`, ...extra };
}

// GET path -> its JSON; a failure throws ApiError with the broker's code
// and message (the API's error body), or says which request failed how.
export async function get(path, { signal } = {}) {
  let res;
  try {
    res = await fetch(path, { headers: authHeaders(), signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "unreachable", `GET ${path}: the broker did not answer (${e.message})`);
  }
  let body = null;
  try { body = await res.json(); } catch { /* not JSON: said below */ }
  if (!res.ok) {
    const err = body?.error;
    throw new ApiError(res.status, err?.code ?? `http_${res.status}`,
      err?.message ? `${err.message} (HTTP ${res.status})` : `GET ${path}: HTTP ${res.status}`);
  }
  if (body === null) throw new ApiError(res.status, "bad_json", `GET ${path}: the answer is not JSON`);
  return body;
}
