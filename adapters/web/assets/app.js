// agentwatch serve: the page scripts. No framework, no build; every value is put in the page as
// text (textContent), never as markup.
"use strict";

const $ = (sel, root) => (root || document).querySelector(sel);

function iso(unix) {
  if (unix === null || unix === undefined) return "";
  return new Date(unix * 1000).toISOString().replace(".000Z", "Z");
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function token() { return sessionStorage.getItem("agentwatch-token") || ""; }

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token()) headers["Authorization"] = "Bearer " + token();
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function showMessage(text, isError) {
  const box = $("#message");
  if (!box) return;
  box.textContent = text;
  box.className = isError ? "msg error" : "msg";
}

// <time data-unix="..."> → ISO text (server-rendered pages).
function formatTimes() {
  for (const t of document.querySelectorAll("time[data-unix]")) {
    const unix = Number(t.dataset.unix);
    t.textContent = iso(unix);
    t.setAttribute("datetime", iso(unix));
  }
}

// Loops panel: open alerts.
async function loadLoops() {
  const body = $("#loops tbody");
  try {
    const data = await api("GET", "/api/watchdog/loops");
    body.replaceChildren();
    for (const a of data.loops) {
      body.append(el("tr", { "data-key": a.dedup_key },
        el("td", {}, el("span", { class: "badge sev-" + a.severity }, a.severity)),
        el("td", {}, el("code", {}, a.dedup_key)),
        el("td", {}, el("time", { datetime: iso(a.opened_at) }, iso(a.opened_at))),
        el("td", { class: "state" }, a.resolved_at === null ? a.state : "resolved"),
        el("td", {}, a.title),
        el("td", {}, String(a.flagged_ticks)),
        el("td", {}, el("a", { href: a.tree_url }, "tree"))));
    }
    if (data.loops.length === 0) body.append(el("tr", { class: "none" }, el("td", { colspan: "7", class: "empty" }, "No open loops.")));
    $("#loops").dataset.loaded = String(data.loops.length);
  } catch (e) { showMessage("loops: " + e.message, true); }
}

// Watchdog card: figures and channels.
async function loadStatus() {
  const s = await api("GET", "/api/watchdog/status");
  $("#last-tick").textContent = s.last_tick ? iso(s.last_tick.ticked_at) + " (" + s.last_tick.outcome + ")" : "never";
  $("#sessions-seen").textContent = String(s.sessions_seen);
  $("#flagged").textContent = s.verdicts.flagged + "/" + s.verdicts.total;
  $("#open-alerts").textContent = String(s.open_alerts);
}

async function setChannel(name, change) {
  try {
    await api("POST", "/api/watchdog/channels", Object.assign({ name }, change));
    showMessage("channel " + name + " saved");
  } catch (e) { showMessage("channel " + name + ": " + e.message, true); }
  await loadChannels();
}

async function loadChannels() {
  const data = await api("GET", "/api/watchdog/channels");
  const body = $("#channels tbody");
  body.replaceChildren();
  for (const c of data.channels) {
    const toggle = el("input", { type: "checkbox", class: "toggle", "data-channel": c.name });
    toggle.checked = c.enabled;
    toggle.addEventListener("change", () => setChannel(c.name, { enabled: toggle.checked }));
    const select = el("select", { class: "min-severity", "data-channel": c.name });
    for (const s of ["info", "warning", "critical"]) select.append(el("option", { value: s }, s));
    select.value = c.min_severity;
    select.addEventListener("change", () => setChannel(c.name, { min_severity: select.value }));
    body.append(el("tr", { "data-channel": c.name, "data-enabled": String(c.enabled) },
      el("td", {}, c.name), el("td", {}, c.type),
      el("td", {}, el("label", { class: "switch" }, toggle, c.enabled ? "on" : "off")),
      el("td", {}, select)));
  }
  if (data.channels.length === 0) body.append(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No channels configured.")));
}

// Live configuration: each editable key with its range; an edit goes to `config.local.toml`
// (created at the first edit when there is none) and each job reads it at its next tick.
async function loadConfig() {
  const box = $("#config tbody");
  if (!box) return;
  const data = await api("GET", "/admin/api/config");
  box.replaceChildren();
  if (!data.file) { box.append(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "This server takes no configuration edits."))); return; }
  for (const k of data.keys) {
    const isBool = k.kind === "bool";
    const input = isBool
      ? el("input", { type: "checkbox", "data-key": k.key })
      : el("input", { type: "number", step: k.kind === "count" ? "1" : "any", min: k.min, max: k.max, "data-key": k.key, value: String(k.value) });
    if (isBool) input.checked = Boolean(k.value);
    const bounds = isBool ? "" : (k.min_exclusive ? "> " + k.min : String(k.min)) + " … " + k.max;
    const range = k.note ? (bounds ? bounds + " · " : "") + k.note : bounds;
    const save = el("button", { type: "button", "data-save": k.key }, "Save");
    save.addEventListener("click", async () => {
      const value = isBool ? input.checked : Number(input.value);
      try {
        const r = await api("POST", "/admin/api/config/" + k.key, { value });
        showMessage(k.key + " = " + JSON.stringify(r.value) + " written to " + r.file + ": each job reads it at its next tick");
      } catch (e) { showMessage(e.message, true); }
      await loadConfig();
    });
    box.append(el("tr", { "data-key": k.key, "data-in-file": String(k.in_file) },
      el("td", {}, el("code", {}, k.key)), el("td", {}, input), el("td", { class: "range" }, range), el("td", {}, save)));
  }
  $("#config-file").textContent = data.file + (data.exists ? "" : " (created at the first edit)");
}

async function refreshControls() {
  try { await loadStatus(); await loadChannels(); await loadConfig(); $("#watchdog").dataset.loaded = "1"; }
  catch (e) { showMessage(e.message, true); }
}

async function sendTest() {
  const severity = $("#test-severity").value;
  try {
    const r = await api("POST", "/api/watchdog/test-alert", { severity });
    showMessage(r.sends.length ? r.sends.map(s => s.channel + ": " + s.result + (s.message ? " (" + s.message + ")" : "")).join("; ") : "no enabled channel takes " + severity);
  } catch (e) { showMessage("test alert: " + e.message, true); }
}

// Models page: Block beside each model, Unblock in the Blocked list; the page reloads to show
// the stored list.
function modelButtons() {
  for (const b of document.querySelectorAll("button.block, button.unblock")) {
    b.addEventListener("click", async () => {
      const block = b.classList.contains("block");
      const body = { provider: b.dataset.provider || null, model_id: b.dataset.model };
      if (block) body.reason = "blocked from the models page";
      try {
        await api("POST", "/api/watchdog/models/" + (block ? "block" : "unblock"), body);
        location.reload();
      } catch (e) { showMessage((block ? "block " : "unblock ") + b.dataset.model + ": " + e.message, true); }
    });
  }
}

// The recovery splash: asks the server once a second what to show (the server applies the
// splash rule at its own time) and shows it, or nothing.
function mmss(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
}

function stuckText(seconds) {
  if (!(seconds >= 60)) return "";
  const m = Math.round(seconds / 60);
  return "STUCK " + (m >= 60 ? Math.floor(m / 60) + " H " + (m % 60 ? (m % 60) + " MIN" : "") : m + " MIN");
}

async function pollSplash() {
  const box = $("#splash");
  try {
    const s = await api("GET", "/api/recovery/splash");
    const n = s.notice || {};
    const to = n.action === "reset" ? (n.toLabel ? "Rewinding to " + n.toLabel : "Rewinding to the last milestone") : "Restarting it";
    const copy = {
      countdown: ["Stuck in a loop", to + " in", mmss(s.remaining_s || 0)],
      acting: [n.action === "reset" ? "Rewinding" : "Restarting", n.action === "reset" && n.toLabel ? "Back to " + n.toLabel : "Same place, fresh start", ""],
      done: [n.action === "reset" ? "Rewound" : "Back on track", "The loop is behind us", ""],
      failed: ["That didn't work", "Trying something else next", ""],
    }[s.phase];
    box.dataset.phase = s.visible ? s.phase : "none";
    box.dataset.hiddenBecause = s.hidden_because || "";
    box.hidden = !(s.visible && copy);
    if (copy) {
      $("#splash-title").textContent = copy[0];
      $("#splash-body").textContent = copy[1];
      $("#splash-count").textContent = copy[2];
      $("#splash-loop").textContent = (n.loop || []).slice(0, 4).map(x => String(x).slice(0, 16)).join(" > ");
      $("#splash-stuck").textContent = stuckText(n.stuckSeconds);
    }
  } catch (e) {
    box.hidden = true;
    box.dataset.phase = "none";
  }
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

function saveToken() {
  const input = $("#token");
  if (input) { sessionStorage.setItem("agentwatch-token", input.value); showMessage("token kept for this tab"); }
}

document.addEventListener("DOMContentLoaded", async () => {
  formatTimes();
  const page = document.body.dataset.page;
  if (page === "loops") {
    await loadLoops();
    setInterval(loadLoops, 15000);
  } else if (page === "controls") {
    $("#refresh").addEventListener("click", refreshControls);
    $("#send-test").addEventListener("click", sendTest);
    const t = $("#save-token"); if (t) t.addEventListener("click", saveToken);
    await refreshControls();
  } else if (page === "models") {
    modelButtons();
  } else if (page === "splash") {
    await pollSplash();
    setInterval(pollSplash, 1000);
  }
  document.body.dataset.ready = "1";
});
