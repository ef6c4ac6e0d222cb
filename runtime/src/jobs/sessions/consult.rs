//! The one consultation of a tick: the LLM's second opinion on the flagged roots the plan
//! allows (`watchdog.max_llm_opinions_per_tick`), asked all at once, so a hung model costs one
//! timeout per tick.

use super::memory::Memory;
use crate::config::{Config, Env};
use crate::journal::Line;
use alert_state::{AlertConfig, LlmOpinion, Opinions, RootObservation, Tick};
use std::collections::BTreeMap;

/// Ask where the plan allows and attach each answer to its root's observation.
pub fn opinions(
    config: &Config,
    alert_config: &AlertConfig,
    memory: &mut Memory,
    tick: &mut Tick,
    env: Env<'_>,
) -> Opinions {
    let plan = alert_state::plan_llm_opinions(
        &memory.alerts,
        alert_config,
        tick.roots
            .iter()
            .filter(|r| r.flagged)
            .map(|r| r.root.as_str()),
    );
    let opinions = plan.ask(|planned| {
        ask_opinions(
            config,
            &tick.roots,
            planned,
            tick.now,
            env,
            &mut memory.health.llm_down_since,
        )
    });
    opinions.attach(&mut tick.roots);
    opinions
}

/// Ask the LLM about the planned roots, all at once (one thread each, so a hung model costs one
/// timeout per tick, not one per root); failures leave the opinion empty. An unreachable model is
/// logged once per outage: the first failure is a warning and starts `llm_down_since` (kept with
/// the sources' streaks), later ones are silent until it answers again, which is logged too.
/// With `watchdog.local_llm_enabled` not configured the model is off while nothing answers: an
/// info line says so, no warning.
fn ask_opinions(
    config: &Config,
    roots: &[RootObservation],
    planned: &[&str],
    now: i64,
    env: Env<'_>,
    llm_down_since: &mut Option<i64>,
) -> BTreeMap<String, Option<LlmOpinion>> {
    let mut opinions = BTreeMap::new();
    let endpoint = endpoint(config, env);
    let asked = ask_all(&endpoint, roots, planned);
    let mut first_problem = None;
    let mut answered = false;
    for (root, answer) in asked {
        match answer {
            Ok(opinion) => {
                answered = true;
                opinions.insert(root.clone(), opinion);
                Line::info("watchdog", now)
                    .field("root", &root)
                    .field("llm_opinion", opinion.map_or("none", |o| o.as_str()))
                    .emit();
            }
            Err(e) => {
                first_problem.get_or_insert((root, e));
            }
        }
    }
    if answered {
        // The model answers: an outage is over, and a failure beside answers is that root's own.
        if let Some(since) = llm_down_since.take() {
            Line::info("watchdog", now)
                .field("llm", "answers_again")
                .field("down_for", crate::text::duration(now.saturating_sub(since)))
                .emit();
        }
        if let Some((root, e)) = first_problem {
            Line::warning("watchdog", now)
                .field("root", root)
                .field("llm_opinion", "none")
                .field("problem", e)
                .emit();
        }
    } else if let Some((root, e)) = first_problem
        && llm_down_since.is_none()
    {
        *llm_down_since = Some(now);
        if config.defaulted.local_llm {
            // Nobody set a model up: nothing answering at its URL is no failure.
            Line::info("watchdog", now)
                .field("llm", "off")
                .field(
                    "reason",
                    format!(
                        "nothing answers at {} and watchdog.local_llm_enabled is not set",
                        agentwatch_http::shown_url(&config.watchdog.llm.url)
                    ),
                )
                .emit();
        } else {
            Line::warning("watchdog", now)
                .field("root", root)
                .field("llm_opinion", "none")
                .field("problem", e)
                .field(
                    "action",
                    "no second opinion until it answers; logged once per outage",
                )
                .emit();
        }
    }
    opinions
}

/// The configured chat endpoint of the second opinion.
fn endpoint(config: &Config, env: Env<'_>) -> agentwatch_llm::ChatEndpoint {
    let llm = &config.watchdog.llm;
    agentwatch_llm::ChatEndpoint {
        base_url: llm.url.clone(),
        dialect: if llm.dialect == "openai" {
            agentwatch_llm::Dialect::OpenAi
        } else {
            agentwatch_llm::Dialect::Ollama
        },
        model: config.llm_model().to_owned(),
        api_key: llm.api_key_env.as_deref().and_then(env),
        timeout: crate::config::duration(llm.timeout_s),
    }
}

/// Each planned root's answer, asked on a thread of its own.
fn ask_all(
    endpoint: &agentwatch_llm::ChatEndpoint,
    roots: &[RootObservation],
    planned: &[&str],
) -> Vec<(String, Result<Option<LlmOpinion>, agentwatch_llm::LlmError>)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = planned
            .iter()
            .filter_map(|root| roots.iter().find(|r| r.root == *root))
            .map(|obs| {
                let handle = scope.spawn(move || {
                    agentwatch_llm::ask_loop_opinion(endpoint, &obs.agent, &obs.summary)
                });
                (obs.root.clone(), handle)
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(root, h)| h.join().ok().map(|answer| (root, answer)))
            .collect()
    })
}
