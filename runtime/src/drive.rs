//! The one driver of the recovery policies: feed a policy an event, perform the actions it
//! decides (through the caller's [`Perform`]), feed their outcomes back, until nothing is left.
//!
//! ```text
//! event, now -> policy.feed -> decisions -> for each, in order:
//!     performer.decided(now, decision, answering)
//!     action? -> performer.perform(policy, action, now) -> Some((then, outcome event))
//!         -> policy.feed(outcome, then) -> its decisions come next (before the rest)
//! ```
//!
//! The recover job (router, countdown and restart), the deck job (re-check, restart, nudge,
//! escalation), `agentwatch replay` (nothing performed: outcomes are later timeline lines) and the
//! policies' property tests (a simulated caller with random answers) all drive through [`drive`].
//! The driver owns no clock: the performer says when each outcome came.

use crate::journal::Line;
use recovery_policy::{Decision, Policy};

/// The most outcome events one [`drive`] feeds back. The policies ask for at most three in a
/// row (a re-check, a restart, its result); the bound only stops a policy bug from looping.
pub const MAX_FOLLOW_UPS: usize = 32;

/// A decision of policy `P`.
pub type DecisionOf<P> = Decision<<P as Policy>::Name, <P as Policy>::Action>;

/// What the caller does with a policy's decisions.
pub trait Perform<P: Policy> {
    /// What stops a drive (a write that failed, an I/O error on the replay's output).
    type Error;

    /// Every decision, in the order decided, with the time it was decided at. `answering` is the
    /// action whose outcome it answers (`None` for the decisions of the event given to [`drive`]).
    fn decided(
        &mut self,
        now: i64,
        decision: &DecisionOf<P>,
        answering: Option<&P::Action>,
    ) -> Result<(), Self::Error>;

    /// Performs `action`, decided at `now` by `policy` (whose state the caller may store first,
    /// never change). Returns the event that reports its outcome and the time it came, or `None`
    /// when nothing is fed back (an escalation, a dry run, an answer that never came).
    fn perform(
        &mut self,
        policy: &P,
        action: &P::Action,
        now: i64,
    ) -> Result<Option<(i64, P::Event)>, Self::Error>;
}

/// What one drive came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Driven {
    /// Outcome events fed back.
    pub follow_ups: usize,
    /// Actions left unperformed because [`MAX_FOLLOW_UPS`] was reached.
    pub unperformed: usize,
}

impl Driven {
    /// The journal warning of a drive cut short by [`MAX_FOLLOW_UPS`] (a policy bug), if it was.
    pub fn warning(&self, job: &str, now: i64) -> Option<Line> {
        (self.unperformed > 0).then(|| {
            Line::warning(job, now)
                .field("warning", "follow_ups")
                .field(
                    "problem",
                    format!("more than {MAX_FOLLOW_UPS} outcomes in a row"),
                )
                .field("unperformed", self.unperformed)
        })
    }
}

/// Feeds `event` at `now` to `policy`, then performs every action decided and feeds each
/// outcome back, depth first: the decisions an outcome leads to come before the remaining
/// decisions of the event that asked for it (a re-check's restart before the next candidate's
/// `deferred`).
pub fn drive<P: Policy, F: Perform<P>>(
    policy: &mut P,
    config: &P::Config,
    event: &P::Event,
    now: i64,
    performer: &mut F,
) -> Result<Driven, F::Error> {
    struct Frame<P: Policy> {
        now: i64,
        answering: Option<P::Action>,
        decisions: std::vec::IntoIter<DecisionOf<P>>,
    }
    let mut driven = Driven::default();
    let mut stack: Vec<Frame<P>> = vec![Frame {
        now,
        answering: None,
        decisions: policy.feed(config, event, now).into_iter(),
    }];
    while let Some(frame) = stack.last_mut() {
        let Some(mut decision) = frame.decisions.next() else {
            stack.pop();
            continue;
        };
        let now = frame.now;
        performer.decided(now, &decision, frame.answering.as_ref())?;
        let Some(action) = decision.action.take() else {
            continue;
        };
        let Some((then, outcome)) = performer.perform(policy, &action, now)? else {
            continue;
        };
        if driven.follow_ups >= MAX_FOLLOW_UPS {
            driven.unperformed += 1;
            continue;
        }
        driven.follow_ups += 1;
        let decisions = policy.feed(config, &outcome, then).into_iter();
        stack.push(Frame {
            now: then,
            answering: Some(action),
            decisions,
        });
    }
    Ok(driven)
}

#[cfg(test)]
mod tests {
    use super::*;
    use recovery_policy::restart_guard::{
        GuardAction, GuardEvent, RestartGuardConfig, RestartGuardState, RestartReply,
        RestartResult, SessionObservation, SessionStatus,
    };

    fn session(id: &str, title: &str, status: &str) -> SessionObservation {
        SessionObservation {
            id: id.to_owned(),
            title: title.to_owned(),
            status: SessionStatus::parse(Some(status)),
            ..SessionObservation::default()
        }
    }

    /// Answers a re-check with the session still in error and a restart with success, 1 s later.
    #[derive(Default)]
    struct Caller {
        seen: Vec<(i64, &'static str, Option<&'static str>)>,
    }

    impl Perform<RestartGuardState> for Caller {
        type Error = std::convert::Infallible;

        fn decided(
            &mut self,
            now: i64,
            decision: &DecisionOf<RestartGuardState>,
            answering: Option<&GuardAction>,
        ) -> Result<(), Self::Error> {
            let answering = answering.map(|a| match a {
                GuardAction::Recheck { .. } => "recheck",
                GuardAction::Restart { .. } => "restart",
                GuardAction::Escalate { .. } => "escalate",
            });
            self.seen.push((now, decision.name_str(), answering));
            Ok(())
        }

        fn perform(
            &mut self,
            _: &RestartGuardState,
            action: &GuardAction,
            now: i64,
        ) -> Result<Option<(i64, GuardEvent)>, Self::Error> {
            Ok(match action {
                GuardAction::Recheck { session, .. } => Some((
                    now + 1,
                    GuardEvent::Recheck(self::session(session, "conductor-a", "error")),
                )),
                GuardAction::Restart { session, .. } => Some((
                    now + 1,
                    GuardEvent::RestartResult(RestartResult {
                        session: session.clone(),
                        reply: RestartReply::Restarted { warning: None },
                        last_output: None,
                    }),
                )),
                GuardAction::Escalate { .. } => None,
            })
        }
    }

    #[test]
    fn outcomes_are_fed_back_depth_first_at_the_time_they_came() {
        let mut state = RestartGuardState::default();
        let listing = vec![
            session("c1", "conductor-a", "error"),
            session("c2", "conductor-b", "error"),
        ];
        let mut caller = Caller::default();
        let driven = drive(
            &mut state,
            &RestartGuardConfig::default(),
            &GuardEvent::Tick(listing),
            100,
            &mut caller,
        )
        .unwrap();
        assert_eq!(
            caller.seen,
            [
                (100, "recheck", None),
                (101, "restart", Some("recheck")),
                (102, "restart-succeeded", Some("restart")),
                (100, "deferred", None),
            ]
        );
        assert_eq!(
            driven,
            Driven {
                follow_ups: 2,
                unperformed: 0
            }
        );
    }

    /// A policy bug: every outcome asks for the same action again.
    #[derive(Default)]
    struct Asks(usize);

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Again;

    impl recovery_policy::DecisionName for Again {
        fn as_str(self) -> &'static str {
            "again"
        }
    }

    impl Policy for Asks {
        type Config = ();
        type Event = ();
        type Name = Again;
        type Action = ();

        fn feed(&mut self, _: &(), _: &(), _: i64) -> Vec<Decision<Again, ()>> {
            self.0 += 1;
            vec![Decision {
                name: Again,
                reason: "once more".to_owned(),
                session: None,
                action: Some(()),
            }]
        }

        fn next_wakeup(&self, _: &(), _: i64) -> Option<i64> {
            None
        }
    }

    impl Perform<Asks> for usize {
        type Error = std::convert::Infallible;

        fn decided(
            &mut self,
            _: i64,
            _: &DecisionOf<Asks>,
            _: Option<&()>,
        ) -> Result<(), Self::Error> {
            *self += 1;
            Ok(())
        }

        fn perform(
            &mut self,
            _: &Asks,
            _: &(),
            now: i64,
        ) -> Result<Option<(i64, ())>, Self::Error> {
            Ok(Some((now, ())))
        }
    }

    #[test]
    fn a_policy_that_never_stops_asking_is_cut_off() {
        let mut policy = Asks::default();
        let mut decided = 0usize;
        let driven = drive(&mut policy, &(), &(), 0, &mut decided).unwrap();
        assert_eq!(
            driven,
            Driven {
                follow_ups: MAX_FOLLOW_UPS,
                unperformed: 1
            }
        );
        assert_eq!(
            policy.0,
            MAX_FOLLOW_UPS + 1,
            "fed the event and every follow-up"
        );
        assert_eq!(decided, MAX_FOLLOW_UPS + 1, "every decision was seen");
    }
}
