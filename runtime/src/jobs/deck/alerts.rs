//! The deck job's alerts: escalations through the alert lifecycle to the channels (Telegram, the
//! configured ones), and their end.

use super::*;

impl<'a> Runtime<'a> {
    /// The channels a deck alert may go to: the configured ones (`deck.channels` when set) with
    /// their gates and rate limits, and Telegram's escalation chat when configured.
    pub(super) fn alert_config(&self) -> AlertConfig {
        let mut config = self.config.alert_config(&host_name());
        if let Some(names) = &self.config.deck.channels {
            config.channels.retain(|c| names.contains(&c.name));
        }
        if !matches!(self.telegram, Telegram::Off) {
            config.channels.push(ChannelConfig {
                name: TELEGRAM.to_owned(),
                channel_type: "telegram".to_owned(),
                enabled: true,
                min_severity: AlertSeverity::Warning,
                rate_limit_s: alert_state::DEFAULT_RATE_LIMIT_S,
                group_by: alert_state::GroupBy::Channel,
            });
        }
        config
    }

    /// Sends one routed event.
    pub(super) fn deliver(&self, channel: &str, event: &AlertEvent, now: i64) -> SendReport {
        if channel != TELEGRAM {
            return crate::notify::send(self.config, channel, event, self.dry_run, now, self.env);
        }
        match &self.telegram {
            Telegram::Off => SendReport::new(TELEGRAM, "failed", Some("not configured".into())),
            Telegram::NoToken { why } => SendReport::new(TELEGRAM, "failed", Some(why.clone())),
            Telegram::Ready(_) if self.dry_run => SendReport::new(TELEGRAM, "dry_run", None),
            Telegram::Ready(channel) => {
                deliver_report(TELEGRAM, &ChannelKind::Telegram(channel.clone()), event)
            }
        }
    }

    /// The tick's alarms through the alert lifecycle (state `deck.alerts`, dedup key
    /// `deck:{session}`): a raised alarm opens (or escalates) its session's alert, an open alert
    /// whose session is fine again, or gone from a complete listing, resolves; each event goes to
    /// the channels its gates and rate limits let through. Trigger and escalate events are written
    /// to `escalations.log`; every decision is one journal line.
    pub(super) fn alert(&self, states: &mut States, watched: &[Watched], report: &mut TickReport) {
        let now = report.now;
        let raised = std::mem::take(&mut report.raised);
        let cleared = self.cleared(&states.alerts, &raised, watched, report.list_failed);
        if raised.is_empty() && cleared.is_empty() {
            return;
        }
        let tick = AlarmTick {
            now,
            raised,
            cleared,
        };
        let outcome = match process_alarms(&states.alerts, &self.alert_config(), &tick) {
            Ok(outcome) => outcome,
            Err(e) => {
                self.problem(report, format!("deck alerts: {e}"));
                return;
            }
        };
        let mut state = outcome.state.clone();
        for decision in &outcome.decisions {
            let Some(dispatch) = &decision.dispatch else {
                decision_line("deck", now, decision).emit();
                continue;
            };
            let event = &dispatch.event;
            let deliveries = self.dispatch(dispatch, &mut state, now);
            let listed = deliveries
                .iter()
                .map(|d| format!("{}:{}", d.channel, d.result))
                .collect::<Vec<_>>()
                .join(",");
            decision_line("deck", now, decision)
                .field(
                    "deliveries",
                    if listed.is_empty() { "none" } else { &listed },
                )
                .emit();
            let record = self.escalation_record(decision, event, &deliveries, watched, now);
            if event.state == EventState::Resolve {
                report.resolved.push(record);
            } else {
                self.audit(report, "escalations.log", &record);
                report.escalations.push(record);
            }
        }
        report.alert_rows = alert_rows(&outcome.decisions);
        states.alerts = state;
    }

    /// The dedup keys of the open deck alerts not raised again this tick whose session is
    /// fine again, or gone from a listing that did not fail.
    pub(super) fn cleared(
        &self,
        alerts: &AlertState,
        raised: &[Alarm],
        watched: &[Watched],
        list_failed: bool,
    ) -> Vec<String> {
        alerts
            .open_alerts
            .values()
            .filter(|a| a.dedup_key.starts_with(DECK_KEY_PREFIX))
            .filter(|a| !raised.iter().any(|r| r.dedup_key == a.dedup_key))
            .filter(|a| match watched.iter().find(|w| w.info.id == a.root) {
                Some(w) => self.guard_observation(w).is_fine(),
                None => !list_failed,
            })
            .map(|a| a.dedup_key.clone())
            .collect()
    }

    /// Send a decision's event on each route its gates let through (recording each send that
    /// went out in `state`, for the rate limits and the resolve's receivers); a route held back
    /// is reported `skipped` with its reason.
    pub(super) fn dispatch(
        &self,
        dispatch: &Dispatch,
        state: &mut AlertState,
        now: i64,
    ) -> Vec<SendReport> {
        let event = &dispatch.event;
        dispatch
            .routes
            .iter()
            .map(|route| {
                if !route.delivery.is_delivered() {
                    return SendReport::new(&route.channel, "skipped", Some(route.reason.clone()));
                }
                let sent = self.deliver(&route.channel, event, now);
                if matches!(sent.result.as_str(), "sent" | "warning") {
                    state.record_sent(event, &route.channel, route.group_by, now);
                }
                sent
            })
            .collect()
    }

    /// The `escalations.log` record of a decision's event (the resolves' too, for the report):
    /// its session, title, kind (`severity`) and where it went.
    pub(super) fn escalation_record(
        &self,
        decision: &AlertDecision,
        event: &AlertEvent,
        deliveries: &[SendReport],
        watched: &[Watched],
        now: i64,
    ) -> serde_json::Value {
        let alert = decision.alert.as_ref();
        let session = alert.map_or("", |a| a.root.as_str());
        let title = watched
            .iter()
            .find(|w| w.info.id == session)
            .map(|w| w.info.title.clone())
            .unwrap_or_default();
        json!({
            "ts": now,
            "at": iso8601(now),
            "dedup_key": decision.dedup_key,
            "state": event.state.as_str(),
            "severity": alert.map_or("", |a| a.agent.as_str()),
            "message": event.summary,
            "sid": session,
            "title": title,
            "telegram": deliveries.iter().any(|d| d.channel == TELEGRAM && d.result == "sent"),
            "deliveries": deliveries,
            "dry_run": self.dry_run,
        })
    }
}
