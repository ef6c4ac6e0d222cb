//! # alert-state: alert lifecycle and notification routing
//!
//! The alert half of agentwatch's opencode loop watchdog ("Alert lifecycle" and "Notifier
//! pipeline" of the design, as fixed in `decisions.md` section 2). The detector says which root
//! session trees are flagged; this crate decides which alerts open, escalate and resolve, builds
//! the PagerDuty-Events-v2-shaped [`AlertEvent`]s, and says which notification channel gets each
//! one and why the others do not.
//!
//! ## Model: Sans-IO
//!
//! Like `quinn-proto` or `str0m`, the crate is a state machine with no I/O of its own: no clock,
//! no files, no network, no environment, no LLM. Observations and `now` (unix seconds) go in,
//! decisions and a new state come out. The caller (a systemd oneshot) does all the I/O:
//!
//! ```text
//! load AlertState (serde; AlertState::default() when there is none)
//! detector verdicts ─► plan_llm_opinions(state, config, flagged roots) ─► OpinionPlan
//!                     plan.ask(|planned roots| ask the LLM; parse_llm_opinion(reply)) ─► Opinions
//!                     opinions.attach(&mut roots)
//! Tick { now, roots: [RootObservation], gone, stale } ─► process_tick(state, config, tick)
//!                     ─► TickOutcome { state, opinion_plan, decisions: [Decision] }
//! journal every Decision's reason; store outcome.state with the events to send (an outbox)
//! send every delivered Route's event; on success state.record_sent(event, channel, now)
//! ```
//!
//! The stored state records a delivery only when the caller reports its send succeeded
//! ([`AlertState::record_sent`]): a failed send starts no rate-limit window and does not make the
//! channel a receiver of the alert's resolve. Within one tick, routing still reserves a channel,
//! so two alarms of one tick never both go to a rate-limited channel.
//!
//! Every [`Decision`], [`Route`] and [`OpinionDecision`] carries a one-sentence `reason` for the
//! journal: nothing is suppressed silently.
//!
//! ## Lifecycle (one state machine per dedup key `opencode-loop:{root}`)
//!
//! | open alert | root this tick | decision | event |
//! |---|---|---|---|
//! | none | flagged | [`Trigger`](DecisionKind::Trigger): open, `flagged_ticks = 1`, critical if the LLM said yes, else warning | `trigger` |
//! | warning | flagged | `flagged_ticks += 1`; [`Escalate`](DecisionKind::Escalate) to critical when `flagged_ticks >= escalate_after_ticks` (default 3) or the LLM says yes, else [`StillFlagged`](DecisionKind::StillFlagged) | `escalate` / none |
//! | critical | flagged | `flagged_ticks += 1`, [`StillFlagged`](DecisionKind::StillFlagged) | none |
//! | open, no event for `repeat_interval_s` (> 0) | flagged, no escalation due | [`Repeat`](DecisionKind::Repeat): a reminder at the same severity | `trigger` |
//! | open | present, not flagged | [`ResolveFixed`](DecisionKind::ResolveFixed): severity info, `resolved_at = now` | `resolve` |
//! | open | in `gone` | [`ResolveGone`](DecisionKind::ResolveGone): same | `resolve` |
//! | open | in `stale` (no new call within the stale age; not judged) | [`ResolveStale`](DecisionKind::ResolveStale): same | `resolve` |
//! | none | not flagged, or gone | nothing | none |
//! | open | looping, no escalation due, refusals of agentwatch's hook not reported yet (the first, or the stop) | [`Blocked`](DecisionKind::Blocked): the same severity, `details.blocked` | `blocked` |
//! | none | not flagged, the hook's refusal of its latest call standing | [`Trigger`](DecisionKind::Trigger), its summary saying what the hook refused | `trigger` |
//!
//! A resolved alert leaves the state (its decision carries the final record); a later flag opens
//! a fresh alert with `flagged_ticks = 1`. So there is at most one open alert per key and at most
//! one escalate per alert. With `escalate_after_ticks = 1` a new alert opens as critical.
//!
//! ## agentwatch's own refusals (issue 47)
//!
//! A call agentwatch's pre-tool hook refused never ran: the caller counts such calls per tree
//! ([`Refusals`] on [`RootObservation::refusals`]). The hook refuses only a looping session's
//! call, so a tree whose latest call was refused ([`RootObservation::refusal_stands`]) is
//! looping ([`RootObservation::looping`]) until a call runs again, and with no open alert it
//! opens one. An open alert keeps the tree's refusals (`Alert::refusals`, every event's
//! `details.blocked`, every alarm's summary ending with [`Refusals::sentence`]) and tells the
//! channels what is new in them once: the first refusal, then the stop, each a `blocked`
//! event at the alert's severity, routed as a trigger is (an escalation due the same tick
//! carries the news instead: one event per alert per tick). Its resolve is as for any alert.
//!
//! ## LLM second opinions
//!
//! [`plan_llm_opinions`] runs before the LLM is asked: only when `local_llm_enabled`, only for
//! flagged roots whose answer can change the outcome (no open alert, or an open warning alert that
//! does not escalate by tick count this tick), at most `max_llm_opinions_per_tick` (default 3), new roots
//! first. [`parse_llm_opinion`] is strict: `yes` / `no` (trimmed, ASCII case-insensitive), anything
//! else is no opinion. [`process_tick`] recomputes the plan and reports an opinion outside it as
//! [`OpinionIgnored`](DecisionKind::OpinionIgnored) instead of using it.
//!
//! ## Routing
//!
//! Channels are `{name, type, enabled, min_severity, rate_limit_s}` ([`ChannelConfig`]; `rate_limit_s` defaults to 300). A
//! trigger or escalate goes to a channel when it is enabled, the severity is at least its
//! `min_severity`, and it delivered no trigger or escalate in the last `rate_limit_s` seconds (a send that succeeded). The
//! window is half-open, `(now - rate_limit_s, now]`: a channel that delivered at `t` is free again
//! at exactly `t + rate_limit_s`, so a 300 s limit never eats every other tick of a 300 s timer.
//! A resolve bypasses the severity gate and the rate limit (and does not start a window) but goes
//! only to enabled channels that delivered an earlier event of that alert. Each suppression names
//! its [`Suppression`]: `disabled`, `below_severity`, `rate_limited`, `not_delivered_before`.
//! Within a tick, resolves are routed first, then critical before warning, then by dedup key.
//!
//! ```
//! use alert_state::{
//!     AlertConfig, AlertState, ChannelConfig, DecisionKind, GroupBy, EventState, LlmOpinion,
//!     RootObservation, Severity, Tick, parse_llm_opinion, plan_llm_opinions, process_tick,
//!     source_for_host,
//! };
//!
//! let config = AlertConfig {
//!     source: source_for_host("devbox"),
//!     channels: vec![ChannelConfig {
//!         name: "desktop".into(),
//!         channel_type: "desktop".into(),
//!         enabled: true,
//!         min_severity: Severity::Warning,
//!         rate_limit_s: 300,
//!         group_by: GroupBy::Channel,
//!     }],
//!     ..AlertConfig::default()
//! };
//! let state = AlertState::default();
//!
//! let mut roots = vec![RootObservation::flagged("ses_a", "build", "top: read lib.rs x14")];
//! let plan = plan_llm_opinions(&state, &config, ["ses_a"]);
//! // Only the plan can ask, and only its answers reach the tick.
//! let opinions = plan.ask(|planned| {
//!     assert_eq!(planned, ["ses_a"]);
//!     let opinion = parse_llm_opinion(" Yes\n"); // the model's raw reply
//!     planned.iter().map(|root| (root.to_string(), opinion)).collect()
//! });
//! assert_eq!(opinions.get("ses_a"), Some(LlmOpinion::Yes));
//! opinions.attach(&mut roots);
//!
//! let tick = Tick { now: 1_796_000_000, roots, gone: vec![], stale: vec![] };
//! let outcome = process_tick(&state, &config, &tick).expect("valid tick");
//! let decision = &outcome.decisions[0];
//! assert_eq!(decision.kind, DecisionKind::Trigger);
//! let dispatch = decision.dispatch.as_ref().expect("a trigger has an event");
//! assert_eq!(dispatch.event.state, EventState::Trigger);
//! assert_eq!(dispatch.event.severity, Severity::Critical);
//! assert_eq!(dispatch.event.title, "opencode loop: build");
//! assert_eq!(dispatch.event.source, "agentwatch@devbox");
//! assert!(dispatch.routes[0].delivery.is_delivered());
//! // store `outcome.state` (serde) for the next oneshot run
//! ```
#![forbid(unsafe_code)]

mod alarm;
mod config;
mod event;
mod lifecycle;
mod opinion;
mod refusal;
mod router;
mod state;
mod time;

pub use alarm::{Alarm, AlarmTick, process_alarms};
pub use config::{
    AlertConfig, ChannelConfig, ConfigError, DEFAULT_ESCALATE_AFTER_TICKS,
    DEFAULT_MAX_LLM_OPINIONS_PER_TICK, DEFAULT_RATE_LIMIT_S, DEFAULT_SOURCE, GroupBy,
    source_for_host,
};
pub use event::{
    AlertEvent, DEDUP_KEY_PREFIX, EventState, LOOP_KEY_MARK, Severity, dedup_key_for_root,
    is_loop_key, loop_key, loop_root, title_for_agent,
};
pub use lifecycle::{
    Decision, DecisionKind, Dispatch, RootObservation, Tick, TickError, TickOutcome, process_tick,
};
pub use opinion::{
    LlmOpinion, OpinionDecision, OpinionPlan, OpinionSkip, OpinionVerdict, Opinions,
    parse_llm_opinion, plan_llm_opinions,
};
pub use refusal::Refusals;
pub use router::{
    Delivery, LastAlarm, Route, RouterState, Suppression, alarm_window, window_is_of, window_of,
    windows_of,
};
pub use state::{Alert, AlertState};
pub use time::iso8601;
