//! The deck job's act step: what the policies decided, done (a re-check, `session restart`,
//! `session send`), each a journal line and an audit record.

use super::*;

impl<'a> Runtime<'a> {
    /// Everything a tick knows about one listed session.
    pub(super) fn watch(
        &self,
        listed: &SessionInfo,
        scan: &mut Option<Vec<pollers::Poller>>,
        report: &mut TickReport,
    ) -> Watched {
        let profile = listed.profile.clone().or_else(|| self.profile.clone());
        let (info, shown) = self.show(listed, profile.as_deref());
        let obs = self.observation(&info);
        let pollers = self.pollers_of(&obs, &info, scan, report);
        let waiting_child =
            info.parent_session_id.is_some() && obs.status == SessionStatus::Waiting;
        let pane_hash = if waiting_child {
            match self.capture(&info) {
                Ok(text) => Some(pane_hash(&text)),
                Err(why) => {
                    if self.verbose {
                        Line::info("deck", report.now)
                            .field("session", &info.id)
                            .field("pane", "unreadable")
                            .field("reason", &why)
                            .emit();
                    }
                    None
                }
            }
        } else {
            None
        };
        let watched = Watched {
            info,
            profile,
            shown,
            pane_hash,
            pollers,
        };
        let summary = json!({
            "id": watched.info.id,
            "title": watched.info.title,
            "profile": watched.profile,
            "status": obs.status.as_str(),
            "shown": watched.shown,
            "critical": obs.critical_because(),
            "parent_session_id": watched.info.parent_session_id,
            "pane_hash": watched.pane_hash,
            "pollers": watched.pollers,
        });
        if self.verbose {
            Line::info("deck", report.now)
                .field("session", &watched.info.id)
                .field("title", &watched.info.title)
                .field("profile", watched.profile.as_deref().unwrap_or(""))
                .field("status", obs.status.as_str())
                .field("shown", &watched.shown)
                .field("critical", obs.critical_because().unwrap_or("no"))
                .field("child", watched.info.parent_session_id.is_some())
                .field(
                    "pane",
                    watched
                        .pane_hash
                        .as_deref()
                        .map_or("-", |h| h.get(..12).unwrap_or(h)),
                )
                .emit();
        }
        report.sessions.push(summary);
        watched
    }

    pub(super) fn log_decision<N: DecisionName, A: Serialize>(
        &self,
        report: &mut TickReport,
        policy: &str,
        decision: &Decision<N, A>,
    ) {
        let mut value = serde_json::to_value(decision).unwrap_or(Value::Null);
        if let Value::Object(object) = &mut value {
            object.insert("policy".to_owned(), Value::String(policy.to_owned()));
        }
        report.decisions.push(value);
        if !self.verbose && QUIET.contains(&decision.name_str()) {
            return;
        }
        // An action (a restart, a nudge, an escalation) is a warning; a decision to wait is info.
        let priority = if decision.action.is_some() {
            Priority::Warning
        } else {
            Priority::Info
        };
        let action = decision.action.as_ref().map(kind_of);
        Line::new(priority, "deck", report.now)
            .field("policy", policy)
            .field("decision", decision.name_str())
            .field_opt("session", decision.session.as_ref())
            .field_opt("action", action)
            .field_opt(
                "dry_run",
                (decision.action.is_some() && self.dry_run).then_some(true),
            )
            .field("reason", &decision.reason)
            .emit();
    }

    /// A fresh observation of one session, just before restarting it.
    pub(super) fn recheck(
        &self,
        id: &str,
        watched: &[Watched],
        report: &mut TickReport,
    ) -> SessionObservation {
        let Some(seen) = watched.iter().find(|w| w.info.id == id) else {
            return SessionObservation {
                id: id.to_owned(),
                ..SessionObservation::default()
            };
        };
        let (info, shown) = self.show(&seen.info, seen.profile.as_deref());
        let mut obs = self.observation(&info);
        if shown != "found" {
            obs.status = SessionStatus::Unreadable;
        }
        let mut fresh_scan = None;
        obs.pollers = self.pollers_of(&obs, &info, &mut fresh_scan, report);
        obs.last_output = self
            .capture(&info)
            .ok()
            .map(|text| pane_tail(&text, TAIL_LINES))
            .filter(|t| !t.is_empty());
        obs
    }

    /// Drives one event through a policy with this tick's [`Caller`].
    pub(super) fn drive<P: Policy>(
        &self,
        policy: &mut P,
        config: &P::Config,
        event: &P::Event,
        watched: &[Watched],
        report: &mut TickReport,
    ) where
        for<'c> Caller<'c>: Perform<P, Error = Infallible>,
    {
        let now = report.now;
        let mut caller = Caller {
            rt: self,
            watched,
            report,
            restarted: None,
            why: None,
        };
        let Ok(driven) = drive(policy, config, event, now, &mut caller);
        if let Some(line) = driven.warning("deck", now) {
            self.problem(report, line.fields());
        }
    }

    pub(super) fn restart_record(
        &self,
        id: &str,
        watched: &[Watched],
        now: i64,
        extra: Value,
    ) -> Value {
        let seen = watched.iter().find(|w| w.info.id == id);
        let mut record = json!({
            "ts": now,
            "at": iso8601(now),
            "id": id,
            "title": seen.map(|w| w.info.title.as_str()).unwrap_or(""),
            "profile": seen.and_then(|w| w.profile.as_deref()),
            // Why the session is one the watchdog may restart (conductor- title, group, flag...).
            "critical": seen.and_then(|w| self.observation(&w.info).critical_because()),
            "dry_run": self.dry_run,
        });
        if let (Value::Object(record), Value::Object(extra)) = (&mut record, extra) {
            record.extend(extra);
        }
        record
    }

    /// `session restart ID --json`: the result to feed back, and the audit record of the restart
    /// (its `decision` added once the guard answered); `None` in a dry run.
    pub(super) fn restart(
        &self,
        report: &mut TickReport,
        watched: &[Watched],
        id: &str,
        trigger: String,
        dry_run: bool,
    ) -> Option<(RestartResult, Value)> {
        let now = report.now;
        let seen = watched.iter().find(|w| w.info.id == id);
        if dry_run {
            report.actions.push(json!({
                "kind": "restart", "session": id, "trigger": trigger, "performed": false,
                "result": "dry-run",
            }));
            return None;
        }
        let profile = seen.and_then(|w| w.profile.as_deref());
        let reply = self
            .deck
            .restart(id, profile)
            .unwrap_or_else(|e| RestartReply::Failed {
                error: e.to_string(),
            });
        let (result, text) = match &reply {
            RestartReply::Restarted { warning } => {
                ("restarted", warning.clone().unwrap_or_default())
            }
            RestartReply::Refused { reason } => ("refused", reason.clone()),
            RestartReply::Failed { error } => ("failed", error.clone()),
        };
        let last_output = match (&reply, seen) {
            (RestartReply::Failed { .. }, Some(w)) => self
                .capture(&w.info)
                .ok()
                .map(|t| pane_tail(&t, TAIL_LINES))
                .filter(|t| !t.is_empty()),
            _ => None,
        };
        let record = self.restart_record(
            id,
            watched,
            now,
            json!({
                "trigger": trigger,
                "action": "restart",
                "result": result,
                "reason": text,
            }),
        );
        report.actions.push(json!({
            "kind": "restart", "session": id, "trigger": trigger, "performed": true,
            "result": result, "reason": text,
        }));
        let result = RestartResult {
            session: id.to_owned(),
            reply,
            last_output,
        };
        Some((result, record))
    }

    /// `session send ID MSG --no-wait` (or, in a dry run, only the report of it).
    pub(super) fn nudge(
        &self,
        report: &mut TickReport,
        watched: &[Watched],
        session: &str,
        message: &str,
        dry_run: bool,
    ) {
        if dry_run {
            report.actions.push(json!({
                "kind": "nudge", "session": session, "message": message, "performed": false,
                "result": "dry-run",
            }));
            return;
        }
        let seen = watched.iter().find(|w| w.info.id == session);
        let profile = seen.and_then(|w| w.profile.as_deref());
        let (result, detail) = match self.deck.send(session, profile, message) {
            Ok(sent) => ("sent", sent.answer),
            Err(e) => ("failed", e.to_string()),
        };
        let priority = if result == "failed" {
            Priority::Err
        } else {
            Priority::Info
        };
        Line::new(priority, "deck", report.now)
            .field("action", "nudge")
            .field("session", session)
            .field("result", result)
            .field("detail", &detail)
            .emit();
        let record = self.restart_record(
            session,
            watched,
            report.now,
            json!({
                "action": "nudge",
                "message": message,
                "result": result,
                "detail": detail,
            }),
        );
        self.audit(report, "patrol.log", &record);
        report.actions.push(json!({
            "kind": "nudge", "session": session, "message": message, "performed": true,
            "result": result, "detail": detail,
        }));
    }

    /// An escalation of the restart guard, raised as an alarm: it goes through the alert
    /// lifecycle at the end of the tick ([`Self::alert`]).
    pub(super) fn raise(
        &self,
        report: &mut TickReport,
        session: &str,
        severity: EscalationKind,
        message: &str,
        watched: &[Watched],
    ) {
        let kind = kind_of(&severity);
        let seen = watched.iter().find(|w| w.info.id == session);
        let title = seen.map(|w| w.info.title.clone()).unwrap_or_default();
        report.raised.push(Alarm {
            dedup_key: format!("{DECK_KEY_PREFIX}{session}"),
            subject: session.to_owned(),
            severity: if severity == EscalationKind::RateLimit {
                AlertSeverity::Warning
            } else {
                AlertSeverity::Critical
            },
            title: format!(
                "agent-deck {kind}: {}",
                if title.is_empty() { session } else { &title }
            ),
            summary: message.to_owned(),
            details: json!({
                "session": session,
                "title": title,
                "profile": seen.and_then(|w| w.profile.as_deref()),
                "kind": kind,
                "at": iso8601(report.now),
            }),
            kind,
        });
    }
}
