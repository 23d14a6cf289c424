// The dashboard's router: #/signin, #/capacity, #/runs, #/runs/ID. Each
// page renders into <main> and returns what stops it (timers, streams)
// when another page is shown.
import { session } from "./api.js";
import * as signin from "./signin.js";
import * as capacity from "./capacity.js";
import * as runs from "./runs.js";
import * as run from "./run.js";
import { showHealth } from "./health.js";

let stop = null;

function route() {
  const hash = location.hash || "#/runs";
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  if (stop) { stop(); stop = null; }
  const current = parts[0].split("?")[0];
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${current}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.getElementById("who").textContent = session.token() ? "signed in" : "not signed in";
  document.getElementById("signin-link").textContent = session.token() ? "Sign out / switch token" : "Sign in";
  if (!session.token() && current !== "signin") {
    location.replace(`#/signin?next=${encodeURIComponent(hash)}`);
    return;
  }
  if (current === "signin") stop = signin.render(hash);
  else if (current === "capacity") stop = capacity.render();
  else if (current === "runs" && parts[1]) stop = run.render(parts[1]);
  else stop = runs.render();
  document.getElementById("main").focus({ preventScroll: true });
  showHealth(document.getElementById("health"));
}

window.addEventListener("hashchange", route);
// Leaving the page ends its event stream now: chromium kept the streams of
// pages navigated away from open, and at six (HTTP/1.1's limit per host)
// the next page to this broker could not load.
window.addEventListener("pagehide", () => { if (stop) { stop(); stop = null; } });
route();
setInterval(() => showHealth(document.getElementById("health")), 30000);
