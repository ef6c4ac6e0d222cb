//! The hook's answer in each agent's own protocol (`shared/reference/hooks.md`): always exit 0
//! and JSON on standard output (never exit 2, which shows our command line to the model), empty
//! to let the call run.
//!
//! | action | Claude Code | Codex CLI | Gemini CLI | opencode plugin |
//! |---|---|---|---|---|
//! | allow | nothing | nothing | nothing | nothing |
//! | warn | `additionalContext` (the call runs) | refuse | refuse | refuse |
//! | refuse | `permissionDecision: deny` + reason | the same | `decision: deny` + reason | `decision: deny` + reason (the plugin throws it) |
//! | stop | deny + `continue: false` | refuse (Codex rejects `continue`) | `continue: false` (the call does not run) | refuse |
//!
//! Where an agent cannot take an action the ladder never asks for it ([`can`]); a warning or a
//! stop rendered for such an agent anyway falls back to a refusal, never to something the agent
//! would reject (Codex treats an output it rejects as a failed hook and runs the call).

use crate::Agent;
use recovery_policy::hook_ladder::{AgentCan, HookAction};
use serde_json::{Value, json};

/// What `agent` lets a pre-tool hook do.
pub fn can(agent: Agent) -> AgentCan {
    match agent {
        // PreToolUse `additionalContext` (in Claude Code's schema, 2.1.x); `continue: false`.
        Agent::Claude => AgentCan {
            add_context: true,
            stop: true,
        },
        // BeforeTool takes no added context (only AfterTool does); `continue: false` stops
        // before the call runs.
        Agent::Gemini => AgentCan {
            add_context: false,
            stop: true,
        },
        Agent::Codex | Agent::Opencode => AgentCan {
            add_context: false,
            stop: false,
        },
    }
}

/// Standard output for `action` (`None`: let the call run), in `agent`'s protocol.
pub fn render(agent: Agent, action: Option<&HookAction>) -> Vec<u8> {
    let Some(action) = action else {
        return Vec::new();
    };
    let can = can(agent);
    let value = match (agent, action) {
        (Agent::Claude, HookAction::Warn(m)) if can.add_context => json!({
            "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": m}
        }),
        (Agent::Claude, HookAction::Stop(m)) => {
            let mut deny = refusal(agent, m);
            deny["continue"] = Value::Bool(false);
            deny["stopReason"] = Value::String(m.clone());
            deny
        }
        (Agent::Gemini, HookAction::Stop(m)) => json!({"continue": false, "stopReason": m}),
        (_, action) => refusal(agent, action.message()),
    };
    let mut out = serde_json::to_vec(&value).unwrap_or_default();
    out.push(b'\n');
    out
}

/// `agent`'s refusal of the call with `message` as the reason the model reads.
fn refusal(agent: Agent, message: &str) -> Value {
    match agent {
        Agent::Claude | Agent::Codex => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": message,
            }
        }),
        Agent::Gemini | Agent::Opencode => json!({"decision": "deny", "reason": message}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(agent: Agent, action: &HookAction) -> String {
        String::from_utf8(render(agent, Some(action))).unwrap()
    }

    #[test]
    fn allow_is_nothing_at_all() {
        for agent in Agent::ALL {
            assert!(render(agent, None).is_empty());
        }
    }

    /// Every answer of every agent, as the agents read them (hooks.md).
    #[test]
    fn each_agents_answers() {
        let actions = [
            HookAction::Warn("agentwatch: w".into()),
            HookAction::Refuse("agentwatch: r".into()),
            HookAction::Stop("agentwatch: s".into()),
        ];
        let mut all = String::new();
        for agent in Agent::ALL {
            for action in &actions {
                all.push_str(&format!("{agent} {action:?}: {}", rendered(agent, action)));
            }
        }
        insta::assert_snapshot!(all);
    }

    #[test]
    fn codex_is_never_sent_a_field_it_rejects() {
        for action in [
            HookAction::Warn("agentwatch: w".into()),
            HookAction::Stop("agentwatch: s".into()),
        ] {
            let out = rendered(Agent::Codex, &action);
            assert!(
                !out.contains("continue") && !out.contains("additionalContext"),
                "{out}"
            );
            assert!(out.contains("\"permissionDecision\":\"deny\""), "{out}");
        }
    }
}
