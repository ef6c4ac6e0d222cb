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

async function loadConfig() {
  const box = $("#config tbody");
  if (!box) return;
  const data = await api("GET", "/admin/api/config");
  box.replaceChildren();
  if (!data.file) { box.append(el("tr", {}, el("td", { colspan: "3", class: "empty" }, "serve runs without --config: live edits are off."))); return; }
  for (const key of data.keys) {
    const short = key.replace("watchdog.detector.", "").replace("watchdog.", "");
    const overlay = data.overlay[key];
    const current = overlay !== null ? overlay : (key.startsWith("watchdog.detector.") ? data.detector[short] : null);
    const isBool = key === "watchdog.enabled" || key === "watchdog.local_llm_enabled";
    const input = isBool ? el("input", { type: "checkbox", "data-key": key }) : el("input", { type: "number", step: "any", "data-key": key, value: current === null ? "" : String(current) });
    if (isBool) input.checked = current === null ? true : Boolean(current);
    const save = el("button", { type: "button" }, "Save");
    save.addEventListener("click", async () => {
      const value = isBool ? input.checked : Number(input.value);
      try { await api("POST", "/admin/api/config/" + key, { value }); showMessage(key + " saved: effective at the next tick"); }
      catch (e) { showMessage(e.message, true); }
      await loadConfig();
    });
    box.append(el("tr", { "data-key": key }, el("td", {}, el("code", {}, key)), el("td", {}, input), el("td", {}, save)));
  }
  $("#config-file").textContent = data.file;
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
  }
  document.body.dataset.ready = "1";
});
