// Following a run's events (GET /v1/runs/ID/events?follow=1). EventSource
// cannot send an Authorization header, so the stream is read with fetch()
// and parsed here. A dropped stream is resumed with Last-Event-ID (the
// broker sends everything after it), so a reconnect has no gap and no repeat.
import { authHeaders } from "./api.js";

// One "id:/event:/data:" block -> {id, event, data} (comments skipped).
export function parseBlock(block) {
  const msg = { id: null, event: "message", data: "" };
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") msg.id = value;
    else if (field === "event") msg.event = value;
    else if (field === "data") data.push(value);
  }
  msg.data = data.join("\n");
  return data.length || msg.id !== null ? msg : null;
}

// follow("/v1/runs/r1/events", {after, onEvent(ev), onStatus(text)}) ->
// {close()}. onEvent gets each event's JSON; onStatus says "live",
// "reconnecting in N s (why)" or "stopped: why".
export function follow(path, { after = 0, onEvent, onStatus = () => {} }) {
  const ctl = new AbortController();
  let last = after, delay = 500, closed = false;
  const run = async () => {
    while (!closed) {
      try {
        const res = await fetch(`${path}?follow=1&after=${last}`, {
          headers: authHeaders({ "Last-Event-ID": String(last), Accept: "text/event-stream" }), signal: ctl.signal });
        if (res.status === 404 || res.status === 401 || res.status === 403) {
          onStatus(`stopped: the broker answered ${res.status} to the event stream`);
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onStatus("live");
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const msg = parseBlock(buf.slice(0, end));
            buf = buf.slice(end + 2);
            if (!msg || !msg.data) continue;
            const ev = JSON.parse(msg.data);
            if (msg.id !== null) last = Number(msg.id);
            onEvent(ev);
          }
        }
        throw new Error("the stream ended");
      } catch (e) {
        if (closed || e.name === "AbortError") return;
        onStatus(`reconnecting in ${(delay / 1000).toFixed(1)} s (${e.message})`);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 10000);
      }
    }
  };
  run();
  return { close() { closed = true; ctl.abort(); } };
}
