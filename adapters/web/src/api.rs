//! The JSON API over the store (routed by [`crate::route`]).

use crate::{Incoming, Reply, ServeOptions};
use agentwatch_http::{percent_decode, percent_encode};
use agentwatch_store::{AlertRow, ChannelSetting, EventKind, Store, StoreError, TreeVerdict};
use alert_state::Severity;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Mutex;

/// The most verdict rows a tree's history returns.
pub const TREE_ROWS_MAX: usize = 10_000;
/// Tree history rows returned by default.
pub const TREE_ROWS_DEFAULT: usize = 2_000;
/// The largest recovery notice served (the stage page's limit).
pub const NOTICE_MAX_BYTES: u64 = 16_384;
/// Restarts and checks of a job's history returned.
pub const HISTORY_ROWS: usize = 50;
/// Sessions a listing looks at (the newest first; the filters apply to these).
pub const SESSIONS_LISTED: usize = 1_000;

/// What a sessions listing keeps (`GET /api/watchdog/sessions`, `/sessions.html`): `agent`
/// (`claude`), `flagged=1` (only flagged sessions), `q` (text in the id, title or directory,
/// case-insensitive).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionFilter {
    pub agent: Option<String>,
    pub flagged: bool,
    pub text: Option<String>,
}

impl SessionFilter {
    /// The filter a request's query asks for.
    pub(crate) fn of(req: &Incoming) -> Self {
        let param = |key: &str| {
            req.query_param(key)
                .map(|v| percent_decode(&v.replace('+', " ")).trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        Self {
            agent: param("agent"),
            flagged: param("flagged").is_some_and(|v| v != "0"),
            text: param("q").map(|q| q.to_lowercase()),
        }
    }

    /// Whether `session` is kept.
    #[must_use]
    pub fn keeps(&self, session: &agentwatch_store::SessionListing) -> bool {
        let agent = session.agent.as_deref().unwrap_or("opencode");
        let has = |text: &str| {
            [
                Some(session.session_id.as_str()),
                session.title.as_deref(),
                session.directory.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|field| field.to_lowercase().contains(text))
        };
        self.agent.as_deref().is_none_or(|a| a == agent)
            && (!self.flagged || session.flagged)
            && self.text.as_deref().is_none_or(has)
    }
}

/// The shared state of the workers.
pub(crate) struct App {
    pub options: ServeOptions,
    /// Serialises writes of the config overlay.
    config_lock: Mutex<()>,
}

/// A failed request: its reply.
pub(crate) type Handled = Result<Reply, Reply>;

fn store_error(e: &StoreError) -> Reply {
    Reply::error(500, None, format!("store: {e}"))
}

impl App {
    pub fn new(options: ServeOptions) -> Self {
        Self {
            options,
            config_lock: Mutex::new(()),
        }
    }

    pub fn now(&self) -> i64 {
        (self.options.clock)()
    }

    /// The store read-only, `None` when no tick created it yet.
    pub fn read_store(&self) -> Result<Option<Store>, Reply> {
        if !self.options.db.is_file() {
            return Ok(None);
        }
        Store::open_read_only(&self.options.db)
            .map(Some)
            .map_err(|e| store_error(&e))
    }

    /// The sessions the watch follows that `filter` keeps, newest activity first.
    pub(crate) fn session_listing(
        &self,
        filter: &SessionFilter,
    ) -> Result<Vec<agentwatch_store::SessionListing>, Reply> {
        let listed = match self.read_store()? {
            Some(store) => store
                .sessions(SESSIONS_LISTED)
                .map_err(|e| store_error(&e))?,
            None => Vec::new(),
        };
        Ok(listed.into_iter().filter(|s| filter.keeps(s)).collect())
    }

    /// `GET /api/watchdog/sessions`: `{"sessions": [...]}`, each with its tree's page.
    pub(crate) fn sessions(&self, req: &Incoming) -> Handled {
        let listed = self.session_listing(&SessionFilter::of(req))?;
        let sessions: Vec<Value> = listed
            .iter()
            .map(|s| {
                let mut value = serde_json::to_value(s).unwrap_or(Value::Null);
                value["tree_url"] = Value::String(tree_path(&tree_root(s, &listed)));
                value
            })
            .collect();
        Ok(Reply::json(200, &json!({ "sessions": sessions })))
    }

    pub(crate) fn loops(&self) -> Handled {
        let alerts = match self.read_store()? {
            Some(store) => store.alerts(false).map_err(|e| store_error(&e))?,
            None => Vec::new(),
        };
        let loops: Vec<Value> = alerts.iter().map(alert_json).collect();
        Ok(Reply::json(200, &json!({ "loops": loops })))
    }

    pub fn status_value(&self) -> Result<Value, Reply> {
        let Some(store) = self.read_store()? else {
            return Ok(json!({
                "last_tick": null, "sessions_seen": 0,
                "verdicts": {"flagged": 0, "total": 0}, "open_alerts": 0,
            }));
        };
        let err = |e: StoreError| store_error(&e);
        let tick = store.last_tick().map_err(err)?;
        let counts = match &tick {
            Some(t) => Some(store.verdict_counts(t.id).map_err(err)?),
            None => None,
        };
        let open = store.alerts(false).map_err(err)?.len();
        Ok(json!({
            "last_tick": tick.as_ref().map(|t| json!({
                "id": t.id, "ticked_at": t.ticked_at, "sessions_seen": t.sessions_seen,
                "outcome": t.outcome, "alerts_fired": t.alerts_fired,
            })),
            "sessions_seen": tick.as_ref().map_or(0, |t| t.sessions_seen),
            "verdicts": {
                "flagged": counts.map_or(0, |c| c.flagged),
                "total": counts.map_or(0, |c| c.total),
            },
            "open_alerts": open,
        }))
    }

    pub(crate) fn status(&self) -> Handled {
        self.status_value().map(|v| Reply::json(200, &v))
    }

    /// The configured channels with the stored run-time settings applied.
    pub fn channels(&self) -> Result<Value, Reply> {
        let settings = match self.read_store()? {
            Some(store) => store.channel_settings().map_err(|e| store_error(&e))?,
            None => Vec::new(),
        };
        let channels: Vec<Value> = self
            .options
            .channels
            .iter()
            .map(|c| {
                let stored = settings.iter().find(|s| s.name == c.name);
                json!({
                    "name": c.name,
                    "type": c.channel_type,
                    "enabled": stored.map_or(c.enabled, |s| s.enabled),
                    "min_severity": stored.map_or(c.min_severity.as_str(), |s| s.min_severity.as_str()),
                    "rate_limit_s": c.rate_limit_s,
                    "updated_at": stored.map(|s| s.updated_at),
                })
            })
            .collect();
        Ok(json!({ "channels": channels }))
    }

    pub(crate) fn set_channel(&self, req: &Incoming) -> Handled {
        let body = json_object(req, &["name", "enabled", "min_severity"])?;
        let name = body
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Reply::error(400, Some("name"), "name: required, a channel name"))?;
        let Some(configured) = self.options.channels.iter().find(|c| c.name == name) else {
            let known: Vec<&str> = self
                .options
                .channels
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            return Err(Reply::error(
                400,
                Some("name"),
                format!(
                    "name: no channel named {name:?} (configured: {})",
                    known.join(", ")
                ),
            ));
        };
        let enabled = match body.get("enabled") {
            None => None,
            Some(v) => Some(v.as_bool().ok_or_else(|| {
                Reply::error(400, Some("enabled"), "enabled: must be true or false")
            })?),
        };
        let min_severity = match body.get("min_severity") {
            None => None,
            Some(v) => Some(v.as_str().and_then(parse_severity).ok_or_else(|| {
                Reply::error(
                    400,
                    Some("min_severity"),
                    "min_severity: must be info, warning or critical",
                )
            })?),
        };
        if enabled.is_none() && min_severity.is_none() {
            return Err(Reply::error(
                400,
                Some("enabled"),
                "give enabled and/or min_severity",
            ));
        }
        let mut store = Store::open(&self.options.db).map_err(|e| store_error(&e))?;
        let current = store
            .channel_settings()
            .map_err(|e| store_error(&e))?
            .into_iter()
            .find(|s| s.name == name);
        let setting = ChannelSetting {
            name: name.to_owned(),
            enabled: enabled
                .or(current.as_ref().map(|c| c.enabled))
                .unwrap_or(configured.enabled),
            min_severity: min_severity
                .map(|s| s.as_str().to_owned())
                .or(current.map(|c| c.min_severity))
                .unwrap_or_else(|| configured.min_severity.clone()),
            updated_at: self.now(),
        };
        store
            .set_channel_setting(&setting)
            .map_err(|e| store_error(&e))?;
        Ok(Reply::json(200, &json!({ "channel": setting })))
    }

    pub(crate) fn test_alert(&self, req: &Incoming) -> Handled {
        let body = json_object(req, &["severity", "channel_name"])?;
        let severity = match body.get("severity") {
            None => Severity::Warning,
            Some(v) => v.as_str().and_then(parse_severity).ok_or_else(|| {
                Reply::error(
                    400,
                    Some("severity"),
                    "severity: must be info, warning or critical",
                )
            })?,
        };
        let channel = match body.get("channel_name") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                return Err(Reply::error(
                    400,
                    Some("channel_name"),
                    "channel_name: must be a channel name",
                ));
            }
        };
        let Some(sender) = &self.options.test_alert else {
            return Err(Reply::error(503, None, "no channels are configured"));
        };
        let sends = sender
            .send(severity, channel, self.now())
            .map_err(|e| Reply::error(400, Some("channel_name"), e))?;
        let ok = sends.iter().all(|s| s.result != "failed");
        Ok(Reply::json(
            200,
            &json!({ "severity": severity.as_str(), "sends": sends, "ok": ok }),
        ))
    }

    pub(crate) fn config_values(&self) -> Handled {
        let Some(config) = &self.options.config else {
            return Ok(Reply::json(
                200,
                &json!({ "file": null, "keys": [], "detector": detector_thresholds(&self.options.detector) }),
            ));
        };
        config
            .show()
            .map(|v| Reply::json(200, &v))
            .map_err(|r| refusal(&r))
    }

    pub(crate) fn set_config(&self, key: &str, req: &Incoming) -> Handled {
        let key = percent_decode(key);
        let body = json_object(req, &["value"])?;
        let value = body
            .get("value")
            .ok_or_else(|| Reply::error(400, Some("value"), "value: required"))?;
        let Some(config) = &self.options.config else {
            return Err(Reply::error(
                409,
                Some("key"),
                "this server takes no configuration edits",
            ));
        };
        let _guard = self
            .config_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        config
            .set(&key, value)
            .map(|v| Reply::json(200, &v))
            .map_err(|r| refusal(&r))
    }

    /// The detector in force (the caller's configuration with its edits).
    pub fn detector(&self) -> detect_core::DetectConfig {
        match &self.options.config {
            Some(config) => config.detector(),
            None => self.options.detector.clone(),
        }
    }

    /// One tree's verdicts tick by tick.
    pub fn tree(&self, root: &str, req: &Incoming) -> Result<Value, Reply> {
        let limit = match req.query_param("limit") {
            None => TREE_ROWS_DEFAULT,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=TREE_ROWS_MAX).contains(n))
                .ok_or_else(|| {
                    Reply::error(
                        400,
                        Some("limit"),
                        format!("limit: a whole number from 1 to {TREE_ROWS_MAX}"),
                    )
                })?,
        };
        let (rows, alert) = match self.read_store()? {
            Some(store) => {
                let rows = store
                    .tree_history(root, limit)
                    .map_err(|e| store_error(&e))?;
                // The tree's newest loop alert, whichever agent's key it has (`claude-loop:…`).
                let alert = store
                    .alerts(true)
                    .map_err(|e| store_error(&e))?
                    .into_iter()
                    .find(|a| alert_state::loop_root(&a.dedup_key) == Some(root));
                (rows, alert)
            }
            None => (Vec::new(), None),
        };
        let detector = self.detector();
        let dedup_key = alert.as_ref().map_or_else(
            || alert_state::dedup_key_for_root(root),
            |a| a.dedup_key.clone(),
        );
        Ok(json!({
            "root": root,
            "dedup_key": dedup_key,
            "alert": alert.as_ref().map(alert_json),
            "thresholds": detector_thresholds(&detector),
            "ticks": group_ticks(&rows),
        }))
    }

    pub(crate) fn models(&self) -> Handled {
        let rollup = match self.read_store()? {
            Some(store) => store.model_rollup().map_err(|e| store_error(&e))?,
            None => Vec::new(),
        };
        Ok(Reply::json(200, &json!({ "models": rollup })))
    }

    /// The models a person blocked, for a router to route away from.
    pub(crate) fn blocked(&self) -> Handled {
        let blocked = match self.read_store()? {
            Some(store) => store.blocked_models().map_err(|e| store_error(&e))?,
            None => Vec::new(),
        };
        Ok(Reply::json(200, &json!({ "blocked": blocked })))
    }

    /// `{provider, model_id}` of a block or unblock body (a `null` provider: every provider).
    fn model_of(body: &serde_json::Map<String, Value>) -> Result<(Option<String>, String), Reply> {
        let model_id = body
            .get("model_id")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| {
                Reply::error(400, Some("model_id"), "model_id: required, a model's name")
            })?;
        let provider = match body.get("provider") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => {
                return Err(Reply::error(
                    400,
                    Some("provider"),
                    "provider: a provider's name or null",
                ));
            }
        };
        Ok((provider, model_id.to_owned()))
    }

    pub(crate) fn block(&self, req: &Incoming) -> Handled {
        let body = json_object(req, &["provider", "model_id", "reason"])?;
        let (provider, model_id) = Self::model_of(&body)?;
        let reason = match body.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(Reply::error(400, Some("reason"), "reason: text or null")),
        };
        let model = agentwatch_store::BlockedModel {
            provider,
            model_id,
            blocked_at: self.now(),
            reason,
        };
        let mut store = Store::open(&self.options.db).map_err(|e| store_error(&e))?;
        let new = store.block_model(&model).map_err(|e| match e {
            agentwatch_store::BlockError::Invalid(m) => Reply::error(400, Some("model_id"), m),
            agentwatch_store::BlockError::Store(e) => store_error(&e),
        })?;
        Ok(Reply::json(200, &json!({ "blocked": model, "new": new })))
    }

    pub(crate) fn unblock(&self, req: &Incoming) -> Handled {
        let body = json_object(req, &["provider", "model_id"])?;
        let (provider, model_id) = Self::model_of(&body)?;
        let mut store = Store::open(&self.options.db).map_err(|e| store_error(&e))?;
        let was = store
            .unblock_model(provider.as_deref(), &model_id, self.now())
            .map_err(|e| match e {
                agentwatch_store::BlockError::Invalid(m) => Reply::error(400, Some("model_id"), m),
                agentwatch_store::BlockError::Store(e) => store_error(&e),
            })?;
        Ok(Reply::json(
            200,
            &json!({ "provider": provider, "model_id": model_id, "was_blocked": was }),
        ))
    }

    /// The recovery notice's text, if the file is a regular file of 1 to 16,384 bytes.
    fn notice_text(&self) -> Option<String> {
        let path = self.options.recover_notice.as_ref()?;
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() || meta.len() == 0 || meta.len() > NOTICE_MAX_BYTES {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        (!text.is_empty() && text.len() as u64 <= NOTICE_MAX_BYTES).then_some(text)
    }

    /// `GET /recovery-notice.json`: the file as the recover job wrote it (the stage page's
    /// contract), or 204 when there is none to show.
    pub(crate) fn notice_file(&self) -> Reply {
        match self.notice_text() {
            Some(text) => Reply::text(200, "application/json; charset=utf-8", text),
            None => Reply::text(204, "application/json; charset=utf-8", Vec::new()),
        }
    }

    /// What the splash shows now: the notice read, and the splash rule
    /// ([`recovery_policy::notice::splash_visibility`]) applied at the server's time.
    pub fn splash(&self) -> Value {
        use recovery_policy::notice::{HiddenBecause, Splash, parse_notice, splash_visibility};
        let now = self.now();
        let Some(notice) = self.notice_text().and_then(|t| parse_notice(&t).ok()) else {
            return json!({ "now": now, "phase": "none", "visible": false, "notice": null });
        };
        let (phase, remaining, hidden) = match splash_visibility(&notice, now) {
            Splash::Countdown { remaining } => ("countdown", Some(remaining), None),
            Splash::Acting => ("acting", None, None),
            Splash::Done => ("done", None, None),
            Splash::Failed => ("failed", None, None),
            Splash::Hidden(why) => (
                "hidden",
                None,
                Some(match why {
                    HiddenBecause::Stale => "stale",
                    HiddenBecause::FromTheFuture => "from_the_future",
                    HiddenBecause::PhaseOver => "phase_over",
                }),
            ),
        };
        json!({
            "now": now,
            "phase": phase,
            "visible": hidden.is_none(),
            "hidden_because": hidden,
            "remaining_s": remaining,
            "age_s": now - notice.updated_at,
            "notice": notice,
        })
    }

    /// The stored policy state whose envelope names `policy`: (state, saved at).
    fn policy_state(&self, store: &Store, policy: &str) -> Result<Option<(Value, i64)>, Reply> {
        let states = store.states().map_err(|e| store_error(&e))?;
        Ok(states.into_iter().find_map(|s| {
            let v: Value = serde_json::from_str(&s.value).ok()?;
            (v.get("policy")?.as_str()? == policy)
                .then(|| (v.get("state").cloned().unwrap_or(Value::Null), s.updated_at))
        }))
    }

    /// The deck job: sessions under the restart guard, the waiting patrol, escalations.
    pub fn deck(&self) -> Result<Value, Reply> {
        let Some(store) = self.read_store()? else {
            return Ok(
                json!({"sessions": [], "waiting": [], "escalations": [], "restarts": [], "ticks": [], "updated_at": null}),
            );
        };
        let (restarts, ticks) = self.history(Some(&store), "deck")?;
        let guard = self.policy_state(&store, "restart-guard")?;
        let patrol = self.policy_state(&store, "waiting-patrol")?;
        let sessions: Vec<Value> = guard
            .as_ref()
            .and_then(|(s, _)| s.get("sessions")?.as_object().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|(name, record)| {
                let mut v = json!({ "session": name });
                if let (Some(out), Some(rec)) = (v.as_object_mut(), record.as_object()) {
                    out.extend(rec.clone());
                }
                v
            })
            .collect();
        let waiting: Vec<Value> = patrol
            .as_ref()
            .and_then(|(s, _)| s.get("trackers")?.as_object().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|(name, t)| {
                json!({
                    "session": name,
                    "unchanged_since": t.get("unchanged_since"),
                    "last_nudge_at": t.get("last_nudge_at"),
                })
            })
            .collect();
        let escalations: Vec<Value> = store
            .alerts(true)
            .map_err(|e| store_error(&e))?
            .iter()
            .filter(|a| !a.dedup_key.starts_with(alert_state::DEDUP_KEY_PREFIX))
            .map(alert_json)
            .collect();
        Ok(json!({
            "sessions": sessions,
            "waiting": waiting,
            "escalations": escalations,
            "restarts": restarts,
            "ticks": ticks,
            "last_restart_at": guard.as_ref().and_then(|(s, _)| s.get("last_restart_at").cloned()),
            "updated_at": guard.iter().chain(patrol.iter()).map(|(_, at)| *at).max(),
        }))
    }

    /// A job's latest restarts and checks, newest first (`agentwatch_events`).
    fn history(&self, store: Option<&Store>, job: &str) -> Result<(Vec<Value>, Vec<Value>), Reply> {
        let Some(store) = store else {
            return Ok((Vec::new(), Vec::new()));
        };
        let rows = |kind| {
            store
                .recent_events(kind, Some(job), HISTORY_ROWS)
                .map_err(|e| store_error(&e))
        };
        let restarts = rows(EventKind::Restart)?
            .into_iter()
            .map(|e| json!({"at": e.at, "name": e.name, "result": e.result}))
            .collect();
        let checks = rows(EventKind::Tick)?
            .into_iter()
            .map(|e| json!({"at": e.at, "result": e.result, "duration_ms": e.duration_ms}))
            .collect();
        Ok((restarts, checks))
    }

    /// The recover job: its phase, the cooldown left, the restarts it remembers, the notice.
    pub fn recover(&self) -> Result<Value, Reply> {
        let now = self.now();
        let store = self.read_store()?;
        let state = match &store {
            Some(store) => self.policy_state(store, "loop-recovery")?,
            None => None,
        };
        let (restarts, checks) = self.history(store.as_ref(), "recover")?;
        let notice = self
            .options
            .recover_notice
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let (s, updated_at) = match &state {
            Some((s, at)) => (s.clone(), Some(*at)),
            None => (Value::Null, None),
        };
        let field = |k: &str| s.get(k).and_then(Value::as_i64);
        let cooldown_left = field("cooldown_from")
            .map(|from| (i64::from(self.options.recover_cooldown_s) - (now - from)).max(0))
            .filter(|left| *left > 0);
        let phase = if s.get("in_flight").is_some_and(|v| !v.is_null()) {
            "restarting"
        } else if s.get("asked").is_some_and(|v| !v.is_null()) {
            "asking_router"
        } else if cooldown_left.is_some() {
            "cooldown"
        } else if field("first_probe_at").is_some() {
            "suspected"
        } else {
            "idle"
        };
        Ok(json!({
            "phase": phase,
            "cooldown_left_s": cooldown_left.unwrap_or(0),
            "cooldown_s": self.options.recover_cooldown_s,
            "last_restart_at": field("cooldown_from"),
            "vetoes": s.get("vetoes"),
            "first_probe_at": field("first_probe_at"),
            "last_probe_at": field("last_probe_at"),
            "notice": notice,
            "notice_phase": notice.as_ref().and_then(|n| n.get("phase").cloned()),
            "state": s,
            "updated_at": updated_at,
            "now": now,
            "restarts": restarts,
            "checks": checks,
        }))
    }
}

/// A JSON body that must be an object holding only `allowed` keys.
fn json_object(req: &Incoming, allowed: &[&str]) -> Result<serde_json::Map<String, Value>, Reply> {
    let value: Value = serde_json::from_slice(&req.body)
        .map_err(|e| Reply::error(400, Some("body"), format!("body: not JSON ({e})")))?;
    let Value::Object(map) = value else {
        return Err(Reply::error(
            400,
            Some("body"),
            "body: must be a JSON object",
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Reply::error(
            400,
            Some(unknown),
            format!("{unknown}: unknown field (known: {})", allowed.join(", ")),
        ));
    }
    Ok(map)
}

fn parse_severity(text: &str) -> Option<Severity> {
    match text {
        "info" => Some(Severity::Info),
        "warning" => Some(Severity::Warning),
        "critical" => Some(Severity::Critical),
        _ => None,
    }
}

/// An alert as the API shows it, with the link to its tree page.
pub fn alert_json(a: &AlertRow) -> Value {
    json!({
        "dedup_key": a.dedup_key, "session_root": a.session_root, "state": a.state,
        "severity": a.severity, "title": a.title, "summary": a.summary,
        "flagged_ticks": a.flagged_ticks, "opened_at": a.opened_at,
        "last_fired_at": a.last_fired_at, "resolved_at": a.resolved_at,
        "tree_url": tree_path(&a.session_root),
        "refusals": a.refusals,
        "blocked": alert_state::Refusals::sentence_of(a.refusals.as_ref()),
    })
}

/// The root of `session`'s tree: its ancestors followed through `listed` (a cycle or a parent
/// not listed ends the walk at the last one known).
pub fn tree_root(
    session: &agentwatch_store::SessionListing,
    listed: &[agentwatch_store::SessionListing],
) -> String {
    let mut root = session;
    let mut steps = 0;
    while let Some(parent) = root.parent_id.as_deref() {
        match listed.iter().find(|s| s.session_id == parent) {
            Some(up) if steps < 64 => {
                root = up;
                steps += 1;
            }
            _ => return parent.to_owned(),
        }
    }
    root.session_id.clone()
}

/// `/trees/{root}`, the tree page of a root session.
pub fn tree_path(root: &str) -> String {
    format!("/trees/{}", percent_encode(root))
}

/// The thresholds the signals are compared with.
pub fn detector_thresholds(d: &detect_core::DetectConfig) -> Value {
    json!({
        "window": d.window, "dup_min": d.dup_min, "top_min": d.top_min,
        "top_min_ro": d.top_min_ro, "cum_min": d.cum_min, "cover_min": d.cover_min,
        "min_calls": d.min_calls,
    })
}

/// One tick of a tree: its sessions' verdicts.
#[derive(Debug, Serialize)]
pub struct TreeTick<'a> {
    pub tick_id: i64,
    pub ticked_at: i64,
    pub flagged: bool,
    pub sessions: Vec<&'a TreeVerdict>,
}

pub fn group_ticks(rows: &[TreeVerdict]) -> Vec<TreeTick<'_>> {
    let mut ticks: Vec<TreeTick<'_>> = Vec::new();
    for row in rows {
        match ticks.last_mut() {
            Some(t) if t.tick_id == row.tick_id => {
                t.flagged |= row.verdict.flagged;
                t.sessions.push(row);
            }
            _ => ticks.push(TreeTick {
                tick_id: row.tick_id,
                ticked_at: row.ticked_at,
                flagged: row.verdict.flagged,
                sessions: vec![row],
            }),
        }
    }
    ticks
}

fn refusal(r: &crate::ConfigRefusal) -> Reply {
    Reply::error(r.status, Some(r.field), r.message.clone())
}
