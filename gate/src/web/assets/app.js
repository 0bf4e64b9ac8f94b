// The Telos web client: gmcp.mudstandards.org over a WebSocket, and the
// gate's resume protocol (docs/operations.md, "Playing in a browser"):
// every message but Telos.Session/Telos.Ack is counted; input lines are
// numbered and kept until acked; after a drop the page reconnects with its
// token and what it has seen, and resends what was not acked. The token,
// the counts, the unacked lines and what the output pane shows are kept in
// sessionStorage: a reload of this tab resumes the session with nothing
// lost, while a new tab (its own sessionStorage) logs in afresh.
"use strict";

const MAX_LINES = 3000;
const STORE = "telos.session";  // sessionStorage key: this tab's session
const KEEP_CHARS = 200000;      // output kept across a reload, at most
const HISTORY = 200;
const $ = (id) => document.getElementById(id);
const out = $("output"), input = $("input"), statusEl = $("status");

let ws = null;
let token = null;          // the session's resume token (after login)
let seen = 0;              // numbered messages received
let seenTold = 0;
let nextInput = 1;         // the number of the next input line
let unacked = [];          // [{n, text}] sent or not, not acked
let synced = false;        // input may be sent on this socket
let backoff = 250;
let retry = null;
let hidden = false;        // the gate asked to hide what is typed (password)
const history = [];
let historyAt = 0;
const decoder = new TextDecoder();
let ansi = { fg: null, bold: false, underline: false };
let kept = [];             // [kind, text]: what the output pane shows, for a reload
let panels = {};           // the last Room.Info and Char.Vitals, the inventory: for a reload
let keptChars = 0;

function setStatus(text, offline) {
  statusEl.textContent = text;
  statusEl.classList.toggle("offline", !!offline);
}

function wsUrl() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  let url = `${proto}://${location.host}/ws`;
  if (token) url += `?resume=${encodeURIComponent(token)}&seen=${seen}`;
  return url;
}

function connect() {
  clearTimeout(retry);
  retry = null;
  if (ws) return;
  const resuming = !!token;
  setStatus(resuming ? "Reconnecting…" : "Connecting…", resuming);
  const sock = new WebSocket(wsUrl(), ["gmcp.mudstandards.org"]);
  sock.binaryType = "arraybuffer";
  ws = sock;
  sock.onopen = () => {
    backoff = 250;
    sendSize(true);
    if (!resuming) {
      unacked = [];
      gmcp("Core.Hello", { client: "Telos web", version: "1" });
      gmcp("Core.Supports.Set", ["Char 1", "Char.Items 1", "Room 1", "Comm 1"]);
      synced = true;
      setStatus("Connected");
    }
  };
  sock.onmessage = (ev) => {
    if (typeof ev.data === "string") onText(ev.data);
    else { seen++; showText(decoder.decode(new Uint8Array(ev.data), { stream: true })); }
  };
  sock.onclose = () => {
    if (ws !== sock) return;
    ws = null;
    synced = false;
    setStatus(token ? "Connection lost; reconnecting…" : "Disconnected.", true);
    if (token && navigator.onLine !== false) schedule();
    else if (!token) showNotice("*** Disconnected. Reload the page to play again.");
  };
}

function schedule() {
  if (retry) return;
  retry = setTimeout(connect, backoff);
  backoff = Math.min(backoff * 2, 5000);
}

function gmcp(pkg, body) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(`${pkg} ${JSON.stringify(body)}`);
}

// The output pane's size in characters, as a telnet client's NAWS: the
// gate wraps the world's text to it (a phone's narrow pane gets lines that
// fit). Sent as the socket opens and when the pane is resized.
let sizeSent = "";
function paneSize() {
  const probe = document.createElement("span");
  probe.textContent = "0".repeat(10);
  probe.style.visibility = "hidden";
  out.appendChild(probe);
  const cw = probe.getBoundingClientRect().width / 10;
  const ch = probe.getBoundingClientRect().height;
  probe.remove();
  const style = getComputedStyle(out);
  const w = out.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const h = out.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  if (!(cw > 0) || !(ch > 0)) return null;
  return { width: Math.max(1, Math.floor(w / cw)), height: Math.max(1, Math.floor(h / ch)) };
}
function sendSize(force) {
  const size = paneSize();
  if (!size) return;
  const key = `${size.width}x${size.height}`;
  if (key === sizeSent && !force) return;
  sizeSent = key;
  gmcp("Telos.Size", size);
}
let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => sendSize(false), 200);
});

function sendInput(item) {
  gmcp("Telos.Input", { n: item.n, text: item.text });
}

function onText(data) {
  const sp = data.indexOf(" ");
  const pkg = sp < 0 ? data : data.slice(0, sp);
  let body = null;
  try { body = sp < 0 ? null : JSON.parse(data.slice(sp + 1)); } catch (e) { body = null; }
  if (pkg === "Telos.Session") return onSession(body || {});
  if (pkg === "Telos.Who") return showWho((body && body.players) || [], body && body.total);
  if (pkg === "Telos.Ack") {
    const n = body && body.n;
    unacked = unacked.filter((i) => i.n > n);
    return;
  }
  seen++;
  const h = handlers[pkg];
  if (h && body !== null) { h(body); remember(pkg, body); }
}

// What the side panels show, for a reload of this tab.
function remember(pkg, body) {
  const inv = body.location === "inv";
  if (pkg === "Room.Info" || pkg === "Char.Vitals") panels[pkg] = body;
  else if (pkg === "Char.Items.List" && inv) panels.inv = body.items || [];
  else if (pkg === "Char.Items.Add" && inv && body.item) (panels.inv ||= []).push(body.item);
  else if (pkg === "Char.Items.Remove" && inv && body.item) {
    panels.inv = (panels.inv || []).filter((i) => String(i.id) !== String(body.item.id));
  }
}

function onSession(s) {
  if (s.ended) {
    // The kept session is gone (quit, or the grace period passed): what
    // was typed for it must not reach a new login.
    token = null;
    unacked = [];
    seen = 0;
    save();
    showNotice("*** Your session has ended; log in again.");
    gmcp("Core.Hello", { client: "Telos web", version: "1" });
    gmcp("Core.Supports.Set", ["Char 1", "Char.Items 1", "Room 1", "Comm 1"]);
    synced = true;
    setStatus("Connected");
    return;
  }
  token = s.token;
  seen = s.seen;
  seenTold = seen;
  unacked = unacked.filter((i) => i.n > s.input);
  for (const item of unacked) sendInput(item);
  synced = true;
  setStatus("Connected");
}

const handlers = {
  "Room.Info": (r) => {
    $("room-name").textContent = r.name || "—";
    $("room-area").textContent = r.area || "";
    const ul = $("exits");
    ul.replaceChildren();
    for (const dir of Object.keys(r.exits || {})) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = dir;
      b.setAttribute("aria-label", `Go ${dir}`);
      b.addEventListener("click", () => command(dir));
      li.append(b);
      ul.append(li);
    }
  },
  "Char.Vitals": (v) => {
    const box = $("vitals");
    box.replaceChildren();
    for (const [name, value] of Object.entries(v)) {
      if (name.startsWith("max")) continue;
      const max = v["max" + name];
      const div = document.createElement("div");
      div.className = `bar ${name}`;
      const label = document.createElement("span");
      label.textContent = max !== undefined ? `${name} ${value}/${max}` : `${name} ${value}`;
      div.append(label);
      if (max) {
        const track = document.createElement("div");
        track.className = "track";
        track.setAttribute("role", "meter");
        track.setAttribute("aria-label", name);
        track.setAttribute("aria-valuenow", value);
        track.setAttribute("aria-valuemin", 0);
        track.setAttribute("aria-valuemax", max);
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = `${Math.max(0, Math.min(100, (100 * value) / max))}%`;
        track.append(fill);
        div.append(track);
      }
      box.append(div);
    }
  },
  "Char.Items.List": (l) => {
    if (l.location !== "inv") return;
    const ul = $("inventory");
    ul.replaceChildren();
    for (const it of l.items || []) addItem(ul, it);
  },
  "Char.Items.Add": (c) => { if (c.location === "inv" && c.item) addItem($("inventory"), c.item); },
  "Char.Items.Remove": (c) => {
    if (c.location !== "inv" || !c.item) return;
    for (const li of $("inventory").children) if (li.dataset.id === String(c.item.id)) li.remove();
  },
  "Telos.Echo": (e) => {
    hidden = !!e.hide;
    input.type = hidden ? "password" : "text";
  },
};

function addItem(ul, it) {
  const li = document.createElement("li");
  li.dataset.id = it.id;
  li.textContent = it.name;
  ul.append(li);
}

// ANSI SGR to spans; every other escape sequence dropped.
const CSI = /\x1b\[([0-9;]*)([A-Za-z])/g;
function showText(text) {
  text = text.replace(/\r/g, "");
  keep("t", text);
  renderText(text);
}

function renderText(text) {
  let at = 0;
  const frag = document.createDocumentFragment();
  for (const m of text.matchAll(CSI)) {
    if (m.index > at) frag.append(span(text.slice(at, m.index)));
    if (m[2] === "m") sgr(m[1]);
    at = m.index + m[0].length;
  }
  if (at < text.length) frag.append(span(text.slice(at)));
  append(frag);
}

function sgr(params) {
  const codes = params === "" ? [0] : params.split(";").map(Number);
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) ansi = { fg: null, bold: false, underline: false };
    else if (c === 1) ansi.bold = true;
    else if (c === 4) ansi.underline = true;
    else if (c === 22) ansi.bold = false;
    else if (c === 24) ansi.underline = false;
    else if (c >= 30 && c <= 37) ansi.fg = { cls: c - 30 };
    else if (c >= 90 && c <= 97) ansi.fg = { cls: c - 90 + 8 };
    else if (c === 39) ansi.fg = null;
    else if (c === 38 && codes[i + 1] === 5) { ansi.fg = xterm(codes[i + 2]); i += 2; }
    else if (c === 38 && codes[i + 1] === 2) {
      ansi.fg = { rgb: `rgb(${codes[i + 2] | 0},${codes[i + 3] | 0},${codes[i + 4] | 0})` };
      i += 4;
    }
  }
}

function xterm(n) {
  n = n | 0;
  if (n < 16) return { cls: n };
  if (n >= 232) { const g = 8 + 10 * (n - 232); return { rgb: `rgb(${g},${g},${g})` }; }
  n -= 16;
  const v = (x) => (x ? 55 + 40 * x : 0);
  return { rgb: `rgb(${v(Math.floor(n / 36))},${v(Math.floor(n / 6) % 6)},${v(n % 6)})` };
}

function span(text) {
  const s = document.createElement("span");
  s.textContent = text;
  const cls = [];
  if (ansi.bold) cls.push("b");
  if (ansi.underline) cls.push("u");
  if (ansi.fg && ansi.fg.cls !== undefined) cls.push(`f${ansi.fg.cls + (ansi.bold && ansi.fg.cls < 8 ? 8 : 0)}`);
  if (ansi.fg && ansi.fg.rgb) s.style.color = ansi.fg.rgb;
  if (cls.length) s.className = cls.join(" ");
  return s;
}

function append(node) {
  const atEnd = out.scrollHeight - out.scrollTop - out.clientHeight < 40;
  out.append(node);
  while (out.childNodes.length > MAX_LINES) out.firstChild.remove();
  if (atEnd) out.scrollTop = out.scrollHeight;
}

function showNotice(text) {
  showEcho(`${text}\n`);
}

function showEcho(text) {
  keep("e", text);
  renderEcho(text);
}

function renderEcho(text) {
  const s = document.createElement("span");
  s.className = "echo";
  s.textContent = text;
  append(s);
}

// `connect NAME PASSWORD` (or `create`) typed on one line: what is kept
// for a reload shows no password.
const LOGIN_LINE = /^(\s*(?:connect|create)\s+\S+\s+)\S[^\n]*/i;
function withoutPassword(text) {
  return text.replace(LOGIN_LINE, "$1********");
}

// What the pane shows, bounded, for a reload of this tab.
function keep(kind, text) {
  kept.push([kind, text]);
  keptChars += text.length;
  while (keptChars > KEEP_CHARS && kept.length > 1) keptChars -= kept.shift()[1].length;
}

// The who panel: the gate's Telos.Who, sent as the page attaches and on
// every change.
function showWho(players, total) {
  const ul = $("who");
  ul.replaceChildren();
  for (const p of players) {
    const li = document.createElement("li");
    li.textContent = p.name;
    ul.append(li);
  }
  if (total > players.length) {
    const li = document.createElement("li");
    li.textContent = `… and ${total - players.length} more (type who)`;
    ul.append(li);
  }
}

function command(text) {
  // A password (typed hidden, or on a login line) is never saved.
  const item = { n: nextInput++, text, secret: hidden || LOGIN_LINE.test(text) };
  unacked.push(item);
  const echo = hidden ? "\n" : `${text}\n`;
  keep("e", withoutPassword(echo));
  renderEcho(echo);
  if (ws && synced && ws.readyState === WebSocket.OPEN) sendInput(item);
}

$("command").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = input.value;
  input.value = "";
  if (!hidden && text.trim() !== "") {
    if (history[history.length - 1] !== text) history.push(text);
    if (history.length > HISTORY) history.shift();
  }
  historyAt = history.length;
  command(text);
});

input.addEventListener("keydown", (ev) => {
  if (hidden) return;
  if (ev.key === "ArrowUp" && historyAt > 0) {
    historyAt--;
    input.value = history[historyAt];
    ev.preventDefault();
  } else if (ev.key === "ArrowDown" && historyAt < history.length) {
    historyAt++;
    input.value = historyAt < history.length ? history[historyAt] : "";
    ev.preventDefault();
  }
});


// What the page has seen lets the gate forget it.
setInterval(() => {
  if (token && synced && seen !== seenTold) {
    gmcp("Telos.Seen", { n: seen });
    seenTold = seen;
  }
}, 2000);

window.addEventListener("offline", () => {
  setStatus("Offline; what you type is sent when the connection is back.", true);
  if (ws) { const s = ws; ws = null; synced = false; s.close(); }
});
window.addEventListener("online", () => { backoff = 250; if (token) connect(); });

// This tab's session, across a reload: saved as the page goes away (and
// when it is hidden: a phone may discard a background tab), restored at
// load. Saved together, the counts always match what the pane shows.
function save() {
  try {
    // A password not yet acknowledged would be written to storage in the
    // clear: then nothing is kept, and a reload logs in afresh.
    if (!token || unacked.some((i) => i.secret)) { sessionStorage.removeItem(STORE); return; }
    sessionStorage.setItem(STORE, JSON.stringify({
      token, seen, nextInput, unacked, kept, panels,
      history: history.filter((h) => !LOGIN_LINE.test(h)),
    }));
  } catch (e) { /* storage full or off: a reload logs in afresh */ }
}

function restore() {
  let s = null;
  try { s = JSON.parse(sessionStorage.getItem(STORE)); } catch (e) { s = null; }
  if (!s || typeof s.token !== "string") return;
  token = s.token;
  seen = Number(s.seen) || 0;
  nextInput = Number(s.nextInput) || 1;
  seenTold = seen;
  unacked = Array.isArray(s.unacked) ? s.unacked : [];
  history.push(...(Array.isArray(s.history) ? s.history : []));
  historyAt = history.length;
  for (const [kind, text] of Array.isArray(s.kept) ? s.kept : []) {
    if (typeof text !== "string") continue;
    keep(kind, text);
    if (kind === "t") renderText(text); else renderEcho(text);
  }
  const p = s.panels && typeof s.panels === "object" ? s.panels : {};
  for (const pkg of ["Room.Info", "Char.Vitals"]) if (p[pkg]) handlers[pkg](p[pkg]);
  if (Array.isArray(p.inv)) handlers["Char.Items.List"]({ location: "inv", items: p.inv });
  panels = p;
}

window.addEventListener("pagehide", save);
document.addEventListener("visibilitychange", () => { if (document.hidden) save(); });

restore();
connect();
input.focus();
