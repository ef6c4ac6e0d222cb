//! The hook ladder (issue 47), rule by rule: warn, refuse, stop; a call that breaks the
//! pattern always runs; a session that is not flagged never meets any of it.

use detect_core::PendingCall;
use proptest::prelude::*;
use recovery_policy::hook_ladder::{
    ActMode, AgentCan, HookAction, LadderConfig, LadderDecisionName as N, LadderState, PendingEvent,
};

const CLAUDE: AgentCan = AgentCan {
    add_context: true,
    stop: true,
};
const CODEX: AgentCan = AgentCan {
    add_context: false,
    stop: false,
};

/// The loop's call: a command that ran `n` times among the last calls, failing each time.
fn looping(n: u32, can: AgentCan) -> PendingEvent {
    PendingEvent {
        pending: PendingCall {
            flagged: true,
            changes: false,
            same_calls: n,
            echoed: n.saturating_sub(1),
            failed: n,
            last_ago: Some(1),
        },
        call_key: "bash python3 -c \"import nosuchmodule\"".into(),
        shown: "python3 -c \"import nosuchmodule\"".into(),
        returned: Some("ModuleNotFoundError: No module named 'nosuchmodule'".into()),
        can,
    }
}

fn config(mode: ActMode) -> LadderConfig {
    LadderConfig {
        mode,
        ..LadderConfig::default()
    }
}

/// The names of the decisions on `calls` repeats of the loop's call after three runs.
fn ladder(mode: ActMode, can: AgentCan, calls: u32) -> Vec<N> {
    let mut state = LadderState::default();
    (0..calls)
        .map(|i| state.decide(&config(mode), &looping(3 + i, can)).name)
        .collect()
}

#[test]
fn the_ladder_per_mode_and_agent() {
    use N::*;
    let rows = [
        (ActMode::Off, CLAUDE, vec![Off, Off, Off, Off, Off, Off]),
        (
            ActMode::Warn,
            CLAUDE,
            vec![Warn, Warned, Warned, Warned, Warned, Warned],
        ),
        (
            ActMode::Block,
            CLAUDE,
            vec![Warn, Block, Block, Block, Block, Block],
        ),
        (
            ActMode::Stop,
            CLAUDE,
            vec![Warn, Block, Block, Block, Stop, Stop],
        ),
        // Codex cannot be stopped by a hook: it keeps refusing.
        (
            ActMode::Stop,
            CODEX,
            vec![Warn, Block, Block, Block, Block, Block],
        ),
    ];
    for (mode, can, expected) in rows {
        assert_eq!(ladder(mode, can, 6), expected, "{mode:?} {can:?}");
    }
}

#[test]
fn a_warning_runs_the_call_where_the_agent_takes_context_and_is_the_first_refusal_elsewhere() {
    let warn = |can| {
        LadderState::default()
            .decide(&LadderConfig::default(), &looping(3, can))
            .action
            .unwrap()
    };
    assert!(matches!(warn(CLAUDE), HookAction::Warn(_)));
    assert!(matches!(warn(CODEX), HookAction::Refuse(_)));
}

#[test]
fn every_message_starts_with_agentwatch_and_says_what_repeats_and_what_to_do() {
    let mut state = LadderState::default();
    let config = config(ActMode::Stop);
    let mut messages = Vec::new();
    for i in 0..5 {
        let decision = state.decide(&config, &looping(3 + i, CLAUDE));
        messages.push(decision.action.unwrap().message().to_owned());
    }
    for message in &messages {
        assert!(message.starts_with("agentwatch: "), "{message}");
        assert!(
            message.contains("`python3 -c \"import nosuchmodule\"`"),
            "{message}"
        );
        assert!(message.contains("ModuleNotFoundError"), "{message}");
    }
    insta::assert_snapshot!(messages.join("\n\n"));
}

/// Table: (what, the pending call) that always runs, whatever the ladder went through.
#[test]
fn a_call_that_breaks_the_pattern_always_runs() {
    let base = looping(5, CLAUDE);
    let with = |f: &dyn Fn(&mut PendingCall)| {
        let mut event = base.clone();
        f(&mut event.pending);
        event
    };
    let rows = [
        ("an edit", with(&|p| p.changes = true), N::Changes),
        ("another command", with(&|p| p.same_calls = 0), N::OtherCall),
        ("ran twice only", with(&|p| p.same_calls = 2), N::OtherCall),
        (
            "ran three times, each result new, not failing",
            with(&|p| {
                p.echoed = 0;
                p.failed = 1;
            }),
            N::OtherCall,
        ),
        (
            "the session no longer flagged",
            with(&|p| p.flagged = false),
            N::NotFlagged,
        ),
    ];
    for (what, event, name) in rows {
        let mut state = LadderState::default();
        state.decide(&config(ActMode::Stop), &looping(3, CLAUDE));
        state.decide(&config(ActMode::Stop), &looping(4, CLAUDE));
        let decision = state.decide(&config(ActMode::Stop), &event);
        assert_eq!(decision.name, name, "{what}");
        assert!(decision.action.is_none(), "{what}");
    }
}

#[test]
fn a_session_no_longer_flagged_starts_the_next_loop_with_a_warning() {
    let mut state = LadderState::default();
    let config = LadderConfig::default();
    state.decide(&config, &looping(3, CLAUDE));
    assert_eq!(state.decide(&config, &looping(4, CLAUDE)).name, N::Block);
    let mut healthy = looping(4, CLAUDE);
    healthy.pending.flagged = false;
    state.decide(&config, &healthy);
    assert_eq!(state, LadderState::default());
    assert_eq!(state.decide(&config, &looping(3, CLAUDE)).name, N::Warn);
}

fn pending() -> impl Strategy<Value = PendingCall> {
    (any::<bool>(), any::<bool>(), 0u32..8, 0u32..8, 0u32..8).prop_map(
        |(flagged, changes, same, echoed, failed)| PendingCall {
            flagged,
            changes,
            same_calls: same,
            echoed: echoed.min(same),
            failed: failed.min(same),
            last_ago: (same > 0).then_some(1),
        },
    )
}

fn mode() -> impl Strategy<Value = ActMode> {
    prop::sample::select(ActMode::ALL.to_vec())
}

proptest! {
    /// Whatever came before: a call in a session not flagged, or a call that changes
    /// something, runs with nothing said; `off` never acts; `warn` never refuses where the
    /// agent takes context; nothing stops before `max_blocks` refusals.
    #[test]
    fn the_ladder_never_oversteps(
        calls in prop::collection::vec((pending(), any::<bool>(), any::<bool>()), 1..40),
        mode in mode(),
        max_blocks in 0u32..5,
    ) {
        let config = LadderConfig { mode, max_blocks, min_repeats: 3 };
        let mut state = LadderState::default();
        let mut refusals = 0u32;
        for (pending, add_context, stop) in calls {
            let can = AgentCan { add_context, stop };
            let event = PendingEvent { pending, can, ..looping(3, can) };
            let decision = state.decide(&config, &event);
            match &decision.action {
                None => {}
                Some(action) => {
                    prop_assert!(pending.flagged && !pending.changes, "{decision:?}");
                    prop_assert!(pending.same_calls >= 3);
                    prop_assert!(mode != ActMode::Off);
                    prop_assert!(action.message().starts_with("agentwatch: "));
                    match action {
                        HookAction::Warn(_) => prop_assert!(add_context),
                        HookAction::Refuse(_) => {
                            prop_assert!(mode != ActMode::Warn || !add_context);
                            refusals += 1;
                        }
                        HookAction::Stop(_) => {
                            prop_assert_eq!(mode, ActMode::Stop);
                            prop_assert!(stop);
                            prop_assert!(state.blocks >= max_blocks);
                        }
                    }
                }
            }
            if !pending.flagged {
                refusals = 0;
            }
            prop_assert!(state.blocks <= refusals);
        }
    }
}
