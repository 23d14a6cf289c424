// Sign-in: a user or admin token, pasted. It is checked against the
// broker before it is kept (GET /v1/views/runs answers any known token).
import { h, page } from "./dom.js";
import { session, get } from "./api.js";

export function render(hash) {
  const next = new URLSearchParams(hash.split("?")[1] ?? "").get("next") || "#/runs";
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, size: 48,
    "aria-describedby": "token-help" });
  const msg = h("p", { id: "signin-msg", role: "status" });
  const form = h("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      const token = input.value.trim();
      if (!token) { msg.textContent = "Paste a token first."; return; }
      const before = session.token();
      session.signIn(token);
      try {
        await get("/v1/views/runs");
        location.hash = next.startsWith("#/signin") ? "#/runs" : next;
      } catch (err) {
        if (before) session.signIn(before); else session.signOut();
        msg.className = "error";
        msg.textContent = `Not signed in: ${err.message}`;
      }
    },
  },
  h("label", { for: "token" }, "Token (user or admin)"), " ",
  input, " ",
  h("button", { type: "submit", id: "signin-button" }, "Sign in"),
  h("p", { id: "token-help", class: "note" },
    "Kept in this tab's session storage only and sent as Authorization: Bearer. A user token shows that account's runs; an admin token shows all."));
  const out = h("button", { type: "button", onclick: () => { session.signOut(); msg.textContent = "Signed out."; } }, "Sign out");
  page("Sign in", form, session.token() ? out : null, msg);
  input.focus();
  return null;
}
