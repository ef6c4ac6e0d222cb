//! The pages: Loops panel and Watchdog card (filled by `app.js` from the API), and the tree,
//! models and recovery pages rendered here (the tree's plots as inline SVG). Assets are
//! embedded; every value is HTML-escaped.

use crate::api::{App, SessionFilter, TreeTick, group_ticks, tree_path, tree_root};
use crate::{Incoming, Reply};
use agentwatch_http::percent_decode;
use std::fmt::Write;

const STYLE: &str = include_str!("../assets/style.css");
const SCRIPT: &str = include_str!("../assets/app.js");

/// Escape text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A time as ISO 8601 text a person reads with or without the script (which shows it in the
/// browser's form); the unix seconds stay in `data-unix` for the script.
fn time(unix: Option<i64>) -> String {
    match unix {
        Some(t) => {
            let iso = agentwatch_channels::iso8601(t);
            format!("<time data-unix=\"{t}\" datetime=\"{iso}\">{iso}</time>")
        }
        None => "—".to_owned(),
    }
}

fn layout(page: &str, title: &str, body: &str) -> String {
    let nav = [
        ("loops", "/", "Loops"),
        ("sessions", "/sessions.html", "Sessions"),
        ("controls", "/controls.html", "Watchdog"),
        ("models", "/models.html", "Models"),
        ("recovery", "/recovery.html", "Recovery"),
    ];
    let mut links = String::new();
    for (id, href, label) in nav {
        let here = if id == page { " class=\"here\"" } else { "" };
        let _ = write!(links, "<a href=\"{href}\"{here}>{label}</a>");
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · agentwatch</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script src=\"/assets/app.js\" defer></script></head>\
         <body data-page=\"{page}\"><header><b>agentwatch</b>{links}</header><main>\
         <p id=\"message\" class=\"msg\"></p>{body}</main></body></html>\n",
        title = esc(title)
    )
}

const LOOPS: &str = r#"<section class="card" id="loops"><h2>Loops</h2>
<table><thead><tr><th>Severity</th><th>Dedup key</th><th>Opened at</th><th>State</th><th>Title</th><th>Flagged ticks</th><th></th></tr></thead>
<tbody></tbody></table></section>"#;

const CONTROLS: &str = r#"<section class="card" id="watchdog"><h2>Watchdog</h2>
<div class="figures">
<div class="figure"><span>Last tick</span><b id="last-tick">…</b></div>
<div class="figure"><span>Sessions seen</span><b id="sessions-seen">…</b></div>
<div class="figure"><span>Flagged verdicts</span><b id="flagged">…</b></div>
<div class="figure"><span>Open alerts</span><b id="open-alerts">…</b></div>
</div>
<h3>Notification channels</h3>
<table id="channels"><thead><tr><th>Name</th><th>Type</th><th>Enabled</th><th>Min severity</th></tr></thead><tbody></tbody></table>
<div class="row"><button id="refresh" type="button">Refresh</button>
<select id="test-severity"><option>info</option><option selected>warning</option><option>critical</option></select>
<button id="send-test" type="button">Send test alert</button></div>
</section>
<section class="card"><h2>Live configuration</h2>
<p class="msg">Written to <code id="config-file">—</code>; each job reads it at its next tick.</p>
<table id="config"><thead><tr><th>Key</th><th>Value</th><th>Range</th><th></th></tr></thead><tbody></tbody></table>
</section>"#;

const TOKEN_FORM: &str = r#"<section class="card"><h2>Token</h2><div class="row">
<input id="token" type="password" autocomplete="off" placeholder="serve token">
<button id="save-token" type="button">Use for this tab</button></div></section>"#;

pub fn page(app: &App, path: &str, req: &Incoming) -> Result<Reply, Reply> {
    match path {
        "/" | "/index.html" => Ok(Reply::html(200, layout("loops", "Loops", LOOPS))),
        "/controls.html" => {
            let token = if app.options.token.is_some() {
                TOKEN_FORM
            } else {
                ""
            };
            Ok(Reply::html(
                200,
                layout("controls", "Watchdog", &format!("{CONTROLS}{token}")),
            ))
        }
        "/models.html" => models(app),
        "/sessions.html" => sessions(app, req),
        "/splash.html" => Ok(Reply::html(200, splash_layout())),
        "/recovery.html" => recovery(app),
        "/assets/style.css" => Ok(Reply::text(200, "text/css; charset=utf-8", STYLE)),
        "/assets/app.js" => Ok(Reply::text(200, "text/javascript; charset=utf-8", SCRIPT)),
        p if p.starts_with("/trees/") => tree(app, &percent_decode(&p["/trees/".len()..]), req),
        _ => Err(Reply::html(
            404,
            layout(
                "",
                "Not found",
                "<section class=\"card\"><h2>Not found</h2></section>",
            ),
        )),
    }
}

/// The agents a session may be of, for the sessions page's filter.
const AGENTS: [&str; 4] = ["opencode", "claude", "codex", "gemini"];

/// The sessions page: every session the watch follows, of every agent (its agent, title,
/// directory, calls, verdict and last activity, linked to its tree's page), filtered by the
/// query (`agent`, `flagged`, `q`) through a plain GET form.
fn sessions(app: &App, req: &Incoming) -> Result<Reply, Reply> {
    let filter = SessionFilter::of(req);
    let listed = app.session_listing(&filter)?;
    let mut options = String::from("<option value=\"\">every agent</option>");
    for agent in AGENTS {
        let selected = if filter.agent.as_deref() == Some(agent) {
            " selected"
        } else {
            ""
        };
        let _ = write!(options, "<option{selected}>{agent}</option>");
    }
    let mut body = format!(
        "<section class=\"card\" id=\"sessions\"><h2>Sessions</h2>\
         <form class=\"row\" method=\"get\" action=\"sessions.html\">\
         <select name=\"agent\">{options}</select>\
         <label><input type=\"checkbox\" name=\"flagged\" value=\"1\"{checked}> flagged only</label>\
         <input name=\"q\" value=\"{q}\" placeholder=\"title, directory or id\">\
         <button type=\"submit\">Filter</button></form>\
         <table><thead><tr><th>Agent</th><th>Session</th><th>Title</th><th>Directory</th>\
         <th>Calls</th><th>Verdict</th><th>Last activity</th></tr></thead><tbody>",
        checked = if filter.flagged { " checked" } else { "" },
        q = esc(filter.text.as_deref().unwrap_or("")),
    );
    for s in &listed {
        let verdict = if s.flagged {
            format!("looping: {}", esc(&s.signals.join(", ")))
        } else {
            "ok".to_owned()
        };
        let _ = write!(
            body,
            "<tr class=\"session {cls}\" data-agent=\"{agent}\"><td>{agent}</td>\
             <td><a href=\"{tree}\"><code>{id}</code></a></td><td>{title}</td>\
             <td><code>{dir}</code></td><td>{calls}</td><td>{verdict}</td><td>{at}</td></tr>",
            cls = if s.flagged { "flagged" } else { "quiet" },
            agent = esc(s.agent.as_deref().unwrap_or("opencode")),
            tree = esc(tree_path(&tree_root(s, &listed)).trim_start_matches('/')),
            id = esc(&s.session_id),
            title = esc(s.title.as_deref().unwrap_or("")),
            dir = esc(s.directory.as_deref().unwrap_or("")),
            calls = s.calls.map_or_else(|| "—".to_owned(), |c| c.to_string()),
            at = time(s.last_activity_ms.map(|ms| ms / 1000).or(Some(s.seen_at))),
        );
    }
    if listed.is_empty() {
        body.push_str("<tr><td colspan=\"7\" class=\"empty\">No session matches.</td></tr>");
    }
    body.push_str("</tbody></table></section>");
    Ok(Reply::html(200, layout("sessions", "Sessions", &body)))
}

/// One signal's plot: its per-tick value (the tree's largest over its sessions) against its
/// threshold, flagged ticks marked.
struct Series<'a> {
    title: &'a str,
    values: Vec<f64>,
    /// Thresholds in force, labelled (read-only agents have their own `top`).
    thresholds: Vec<(&'a str, f64)>,
}

const W: f64 = 480.0;
const H: f64 = 150.0;
const PAD_L: f64 = 40.0;
const PAD_B: f64 = 18.0;

fn plot(series: &Series<'_>, flagged: &[bool]) -> String {
    let n = series.values.len();
    let top = series
        .values
        .iter()
        .copied()
        .chain(series.thresholds.iter().map(|(_, t)| *t))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.1;
    let x = |i: usize| {
        if n <= 1 {
            PAD_L + (W - PAD_L) / 2.0
        } else {
            PAD_L + (W - PAD_L - 6.0) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: f64| (H - PAD_B) - (H - PAD_B - 6.0) * (v / top);
    let mut svg = format!(
        "<svg class=\"signal\" data-signal=\"{name}\" viewBox=\"0 0 {W} {H}\" width=\"100%\" role=\"img\" aria-label=\"{name}\">\
         <line class=\"axis\" x1=\"{PAD_L}\" y1=\"{b}\" x2=\"{W}\" y2=\"{b}\"/>\
         <line class=\"axis\" x1=\"{PAD_L}\" y1=\"4\" x2=\"{PAD_L}\" y2=\"{b}\"/>\
         <text x=\"2\" y=\"12\">{top:.2}</text><text x=\"2\" y=\"{b}\">0</text>",
        name = esc(series.title),
        b = H - PAD_B,
    );
    for (label, t) in &series.thresholds {
        let _ = write!(
            svg,
            "<line class=\"threshold\" x1=\"{PAD_L}\" y1=\"{y:.1}\" x2=\"{W}\" y2=\"{y:.1}\"/>\
             <text x=\"{tx}\" y=\"{ty:.1}\">{label} {t}</text>",
            label = esc(label),
            y = y(*t),
            tx = W - 120.0,
            ty = y(*t) - 3.0,
        );
    }
    let points: Vec<String> = series
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
        .collect();
    let _ = write!(
        svg,
        "<polyline class=\"series\" points=\"{}\"/>",
        points.join(" ")
    );
    for (i, v) in series.values.iter().enumerate() {
        if flagged.get(i).copied().unwrap_or(false) {
            let _ = write!(
                svg,
                "<circle class=\"flag\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"/>",
                x(i),
                y(*v)
            );
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{PAD_L}\" y=\"{H}\">{n} tick{s}</text></svg>",
        s = if n == 1 { "" } else { "s" }
    );
    svg
}

/// `text` escaped, each pair of backticks in it a `<code>` span (`` blocked 3 calls of `make` ``).
fn code_spans(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(text).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn tree(app: &App, root: &str, req: &Incoming) -> Result<Reply, Reply> {
    let data = app.tree(root, req)?;
    let rows = match app.read_store()? {
        Some(store) => store
            .tree_history(root, crate::api::TREE_ROWS_DEFAULT)
            .map_err(|e| Reply::error(500, None, format!("store: {e}")))?,
        None => Vec::new(),
    };
    let ticks = group_ticks(&rows);
    let mut body = format!(
        "<section class=\"card\" id=\"tree\" data-root=\"{r}\" data-ticks=\"{n}\"><h2>Tree <code>{r}</code></h2>",
        r = esc(root),
        n = ticks.len()
    );
    match data.get("alert").filter(|a| !a.is_null()) {
        Some(a) => {
            let sev = a["severity"].as_str().unwrap_or("info");
            let _ = write!(
                body,
                "<p><span class=\"badge sev-{s}\">{s}</span> <code>{k}</code> {state}, opened {opened}, {t} flagged tick(s)</p>",
                s = esc(sev),
                k = esc(a["dedup_key"].as_str().unwrap_or("")),
                state = esc(a["state"].as_str().unwrap_or("")),
                opened = time(a["opened_at"].as_i64()),
                t = a["flagged_ticks"].as_i64().unwrap_or(0),
            );
            if let Some(blocked) = a["blocked"].as_str() {
                let _ = write!(body, "<p class=\"blocked\">{}</p>", code_spans(blocked));
            }
        }
        None => body.push_str("<p class=\"empty\">No alert for this tree.</p>"),
    }
    if ticks.is_empty() {
        body.push_str("<p class=\"empty\">No verdicts stored for this tree.</p></section>");
    } else {
        tree_plots(&ticks, &data["thresholds"], &mut body);
        tree_verdicts(&ticks, &mut body);
    }
    Ok(Reply::html(200, layout("", &format!("Tree {root}"), &body)))
}

/// The signals with a figure of their own on the tree page.
const PLOTTED: [&str; 4] = ["dup", "top", "slow", "coverage"];

/// Every signal that fired at some tick of the tree, by name.
fn fired_signals(ticks: &[TreeTick<'_>]) -> std::collections::BTreeSet<String> {
    ticks
        .iter()
        .flat_map(|t| t.sessions.iter())
        .flat_map(|s| s.verdict.signals.iter().cloned())
        .collect()
}

/// A plot per signal that fired with no figure plotted of its own (`repeat`, `cycle`,
/// `stall`, …): 1 at the ticks where it fired.
fn fired_series<'a>(
    ticks: &[TreeTick<'_>],
    fired: &'a std::collections::BTreeSet<String>,
) -> Vec<Series<'a>> {
    fired
        .iter()
        .filter(|n| !PLOTTED.contains(&n.as_str()))
        .map(|name| Series {
            title: name,
            values: ticks
                .iter()
                .map(|t| {
                    let on = t.sessions.iter().any(|s| s.verdict.signals.contains(name));
                    if on { 1.0 } else { 0.0 }
                })
                .collect(),
            thresholds: Vec::new(),
        })
        .collect()
}

/// The tree page's plots: each signal's largest value over the tree's sessions, tick by tick,
/// with the thresholds in force (`th`, from the API) and the flagged ticks; a signal that
/// fired with no figure of its own (`repeat`) is plotted as when it fired, and named.
fn tree_plots(ticks: &[TreeTick<'_>], th: &serde_json::Value, body: &mut String) {
    let at = |label: &'static str, key: &str| th[key].as_f64().map(|t| (label, t));
    let max_of = |f: &dyn Fn(&agentwatch_store::VerdictRow) -> f64| -> Vec<f64> {
        ticks
            .iter()
            .map(|t| {
                t.sessions
                    .iter()
                    .map(|s| f(&s.verdict))
                    .fold(0.0_f64, f64::max)
            })
            .collect()
    };
    let flagged: Vec<bool> = ticks.iter().map(|t| t.flagged).collect();
    let mut series = vec![
        Series {
            title: "dup",
            values: max_of(&|v| v.dup),
            thresholds: at("threshold", "dup_min").into_iter().collect(),
        },
        Series {
            title: "top",
            values: max_of(&|v| v.top as f64),
            thresholds: [at("threshold", "top_min"), at("read-only", "top_min_ro")]
                .into_iter()
                .flatten()
                .collect(),
        },
        Series {
            title: "slow",
            values: max_of(&|v| v.slow as f64),
            thresholds: at("threshold", "cum_min").into_iter().collect(),
        },
        Series {
            title: "coverage",
            values: max_of(&|v| v.coverage),
            thresholds: at("threshold", "cover_min").into_iter().collect(),
        },
        Series {
            title: "calls_since_landed",
            values: max_of(&|v| v.calls_since_landed as f64),
            thresholds: Vec::new(),
        },
    ];
    let fired = fired_signals(ticks);
    series.extend(fired_series(ticks, &fired));
    let fired_line = if fired.is_empty() {
        String::new()
    } else {
        format!(
            " Fired: <b class=\"fired\">{}</b> (1 where it fired).",
            esc(&fired
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "))
        )
    };
    let _ = write!(
        body,
        "<p class=\"msg\">Each signal's largest value over the tree's sessions, tick by tick, from {} to {}; the dashed line is the threshold in force, red dots are flagged ticks.{fired_line}</p><div class=\"plots\">",
        time(ticks.first().map(|t| t.ticked_at)),
        time(ticks.last().map(|t| t.ticked_at)),
    );
    for s in &series {
        let _ = write!(
            body,
            "<div class=\"plot\"><h3>{}</h3>{}</div>",
            esc(s.title),
            plot(s, &flagged)
        );
    }
    body.push_str("</div></section>");
}

/// The tree page's table of its latest verdicts (the last 20 ticks, newest first).
fn tree_verdicts(ticks: &[TreeTick<'_>], body: &mut String) {
    body.push_str(
        "<section class=\"card\"><h2>Latest verdicts</h2><table id=\"verdicts\"><thead><tr><th>Tick</th><th>Session</th><th>Flagged</th><th>Signals</th><th>dup</th><th>top</th><th>slow</th><th>coverage</th><th>calls since landed</th><th>Model</th><th>Cost since landed</th></tr></thead><tbody>",
    );
    for t in ticks.iter().rev().take(20) {
        for s in &t.sessions {
            let v = &s.verdict;
            let _ = write!(
                body,
                "<tr class=\"{cls}\"><td>{at}</td><td><code>{sid}</code></td><td>{f}</td><td>{sig}</td><td>{dup:.3}</td><td>{top} <small>{what}</small></td><td>{slow}</td><td>{cov:.2}</td><td>{csl}</td><td>{model}</td><td>{cost}</td></tr>",
                cls = if v.flagged { "flagged" } else { "quiet" },
                at = time(Some(t.ticked_at)),
                sid = esc(&v.session_id),
                f = if v.flagged { "yes" } else { "no" },
                sig = esc(&v.signals.join(", ")),
                dup = v.dup,
                top = v.top,
                what = esc(&v.top_what),
                slow = v.slow,
                cov = v.coverage,
                csl = v.calls_since_landed,
                model = esc(&[v.provider.as_deref(), v.model_id.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("/")),
                cost = v
                    .cost_since_landed_usd
                    .map_or_else(|| "—".to_owned(), |c| format!("${c:.4}")),
            );
        }
    }
    body.push_str("</tbody></table></section>");
}

fn models(app: &App) -> Result<Reply, Reply> {
    let (rollup, blocked) = match app.read_store()? {
        Some(store) => {
            let err =
                |e: agentwatch_store::StoreError| Reply::error(500, None, format!("store: {e}"));
            (
                store.model_rollup().map_err(err)?,
                store.blocked_models().map_err(err)?,
            )
        }
        None => (Vec::new(), Vec::new()),
    };
    let is_blocked = |provider: Option<&str>, id: &str| {
        blocked.iter().any(|b| {
            b.model_id == id && (b.provider.is_none() || b.provider.as_deref() == provider)
        })
    };
    let mut body = String::from(
        "<section class=\"card\" id=\"models\"><h2>Models</h2><p class=\"msg\">Verdicts by the model and provider of the session's assistant messages; a stall is a tree with a flagged verdict. Block a model to tell a router (<code>GET /api/watchdog/models/blocked</code>) to route away from it.</p>\
         <table><thead><tr><th>Provider</th><th>Model</th><th>Verdicts</th><th>Flagged</th><th>Sessions</th><th>Stalled trees</th><th>Cost since landed (USD)</th><th>Last flagged</th><th></th></tr></thead><tbody>",
    );
    for m in &rollup {
        let action = match (m.model_id.as_deref(), m.provider.as_deref()) {
            (Some(id), provider) if is_blocked(provider, id) => {
                "<span class=\"badge sev-info\">blocked</span>".to_owned()
            }
            (Some(id), provider) => format!(
                "<button type=\"button\" class=\"block\" data-model=\"{}\" data-provider=\"{}\">Block</button>",
                esc(id),
                esc(provider.unwrap_or(""))
            ),
            (None, _) => String::new(),
        };
        let _ = write!(
            body,
            "<tr class=\"model\"><td>{p}</td><td>{id}</td><td>{v}</td><td>{f}</td><td>{s}</td><td>{t}</td><td>{c}</td><td>{at}</td><td>{action}</td></tr>",
            p = esc(m.provider.as_deref().unwrap_or("(unknown)")),
            id = esc(m.model_id.as_deref().unwrap_or("(unknown)")),
            v = m.verdicts,
            f = m.flagged,
            s = m.sessions,
            t = m.trees_flagged,
            c = m
                .cost_usd
                .map_or_else(|| "—".to_owned(), |c| format!("{c:.4}")),
            at = time(m.last_flagged_at),
        );
    }
    if rollup.is_empty() {
        body.push_str("<tr><td colspan=\"9\" class=\"empty\">No verdicts stored.</td></tr>");
    }
    body.push_str("</tbody></table></section>");
    body.push_str(
        "<section class=\"card\" id=\"blocked\"><h2>Blocked</h2><table><thead><tr><th>Provider</th><th>Model</th><th>Blocked at</th><th>Reason</th><th></th></tr></thead><tbody>",
    );
    for b in &blocked {
        let _ = write!(
            body,
            "<tr class=\"blocked\"><td>{p}</td><td>{id}</td><td>{at}</td><td>{r}</td><td><button type=\"button\" class=\"unblock\" data-model=\"{id}\" data-provider=\"{pv}\">Unblock</button></td></tr>",
            p = esc(b.provider.as_deref().unwrap_or("(any)")),
            pv = esc(b.provider.as_deref().unwrap_or("")),
            id = esc(&b.model_id),
            at = time(Some(b.blocked_at)),
            r = esc(b.reason.as_deref().unwrap_or("")),
        );
    }
    if blocked.is_empty() {
        body.push_str("<tr><td colspan=\"5\" class=\"empty\">No model blocked.</td></tr>");
    }
    body.push_str("</tbody></table></section>");
    Ok(Reply::html(200, layout("models", "Models", &body)))
}

/// The recovery splash: a page of its own (an overlay for a stream or a wall screen) that asks
/// the server once a second what to show; the server applies the splash rule at its time.
fn splash_layout() -> String {
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
     <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
     <title>Recovery · agentwatch</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
     <script src=\"/assets/app.js\" defer></script></head>\
     <body data-page=\"splash\" class=\"splash-page\"><div id=\"splash\" data-phase=\"none\" hidden>\
     <h1 id=\"splash-title\"></h1><p id=\"splash-body\"></p><p id=\"splash-count\"></p>\
     <p id=\"splash-loop\"></p><p id=\"splash-stuck\"></p></div></body></html>\n"
        .to_owned()
}

/// The recovery page: `agentwatch recover`'s phase and restarts, then the deck's sessions,
/// waiting panes, escalations and restarts.
fn recovery(app: &App) -> Result<Reply, Reply> {
    let rec = app.recover()?;
    let deck = app.deck()?;
    let mut body = recover_card(&rec);
    body.push_str(&restart_history(
        "recover-restarts",
        "Recover: restart history",
        &rec["restarts"],
    ));
    body.push_str(&deck_card(&deck));
    body.push_str(&restart_history(
        "deck-restarts",
        "Deck: restart history",
        &deck["restarts"],
    ));
    Ok(Reply::html(200, layout("recovery", "Recovery", &body)))
}

/// `agentwatch recover`'s figures: phase, cooldown, last restart, notice.
fn recover_card(rec: &serde_json::Value) -> String {
    format!(
        "<section class=\"card\" id=\"recover\" data-phase=\"{phase}\"><h2>Recover</h2><div class=\"figures\">\
         <div class=\"figure\"><span>Phase</span><b>{phase}</b></div>\
         <div class=\"figure\"><span>Cooldown left</span><b>{left} s</b></div>\
         <div class=\"figure\"><span>Last restart</span><b>{last}</b></div>\
         <div class=\"figure\"><span>Notice</span><b>{notice}</b></div></div></section>",
        phase = esc(rec["phase"].as_str().unwrap_or("")),
        left = rec["cooldown_left_s"].as_i64().unwrap_or(0),
        last = time(rec["last_restart_at"].as_i64()),
        notice = esc(rec["notice_phase"].as_str().unwrap_or("none")),
    )
}

/// The deck's sessions, waiting panes and escalations, a table each.
fn deck_card(deck: &serde_json::Value) -> String {
    let mut body = String::from(
        "<section class=\"card\" id=\"deck\"><h2>Deck sessions</h2><table><thead><tr><th>Session</th><th>Restarts in window</th><th>Last restart</th><th>Backoff until</th><th>Failures in a row</th></tr></thead><tbody>",
    );
    deck_session_rows(&mut body, deck);
    body.push_str("</tbody></table><h3>Waiting</h3><table><thead><tr><th>Session</th><th>Pane unchanged since</th><th>Last nudge</th></tr></thead><tbody>");
    waiting_rows(&mut body, deck);
    body.push_str("</tbody></table><h3>Escalations</h3><table><thead><tr><th>Severity</th><th>Key</th><th>State</th><th>Opened</th><th>Title</th></tr></thead><tbody>");
    escalation_rows(&mut body, deck);
    body.push_str("</tbody></table></section>");
    body
}

/// One row a deck session: its restarts in the window, backoff and failures.
fn deck_session_rows(body: &mut String, deck: &serde_json::Value) {
    let sessions = deck["sessions"].as_array().cloned().unwrap_or_default();
    for s in &sessions {
        let restarts: Vec<String> = s["restarts"]
            .as_array()
            .map(|r| r.iter().map(|t| time(t.as_i64())).collect())
            .unwrap_or_default();
        let _ = write!(
            body,
            "<tr class=\"session\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(s["session"].as_str().unwrap_or("")),
            if restarts.is_empty() {
                "—".to_owned()
            } else {
                restarts.join(", ")
            },
            time(s["last_restart_at"].as_i64()),
            time(s["backoff_until"].as_i64()),
            s["consecutive_failures"].as_i64().unwrap_or(0),
        );
    }
    if sessions.is_empty() {
        body.push_str(
            "<tr><td colspan=\"5\" class=\"empty\">No deck session restarted yet.</td></tr>",
        );
    }
}

/// One row a session whose pane waits unchanged.
fn waiting_rows(body: &mut String, deck: &serde_json::Value) {
    let waiting = deck["waiting"].as_array().cloned().unwrap_or_default();
    for w in &waiting {
        let _ = write!(
            body,
            "<tr class=\"waiting\"><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(w["session"].as_str().unwrap_or("")),
            time(w["unchanged_since"].as_i64()),
            time(w["last_nudge_at"].as_i64()),
        );
    }
    if waiting.is_empty() {
        body.push_str("<tr><td colspan=\"3\" class=\"empty\">No session waiting.</td></tr>");
    }
}

/// One row an escalation the deck raised.
fn escalation_rows(body: &mut String, deck: &serde_json::Value) {
    let escalations = deck["escalations"].as_array().cloned().unwrap_or_default();
    for a in &escalations {
        let sev = a["severity"].as_str().unwrap_or("info");
        let _ = write!(
            body,
            "<tr class=\"escalation\"><td><span class=\"badge sev-{s}\">{s}</span></td><td><code>{k}</code></td><td>{st}</td><td>{o}</td><td>{t}</td></tr>",
            s = esc(sev),
            k = esc(a["dedup_key"].as_str().unwrap_or("")),
            st = esc(a["state"].as_str().unwrap_or("")),
            o = time(a["opened_at"].as_i64()),
            t = esc(a["title"].as_str().unwrap_or("")),
        );
    }
    if escalations.is_empty() {
        body.push_str("<tr><td colspan=\"5\" class=\"empty\">No escalations.</td></tr>");
    }
}

/// A job's restarts, newest first: when, what, and how it went.
fn restart_history(id: &str, title: &str, restarts: &serde_json::Value) -> String {
    let mut body = format!(
        "<section class=\"card\" id=\"{id}\"><h2>{}</h2><table><thead><tr><th>When</th><th>Unit or session</th><th>Result</th></tr></thead><tbody>",
        esc(title)
    );
    let rows = restarts.as_array().cloned().unwrap_or_default();
    for r in &rows {
        let result = r["result"].as_str().unwrap_or("");
        let _ = write!(
            body,
            "<tr class=\"restart result-{cls}\"><td>{at}</td><td><code>{name}</code></td><td>{result}</td></tr>",
            cls = if result == "succeeded" { "ok" } else { "bad" },
            at = time(r["at"].as_i64()),
            name = esc(r["name"].as_str().unwrap_or("")),
            result = esc(result),
        );
    }
    if rows.is_empty() {
        body.push_str("<tr><td colspan=\"3\" class=\"empty\">No restart recorded.</td></tr>");
    }
    body.push_str("</tbody></table></section>");
    body
}
