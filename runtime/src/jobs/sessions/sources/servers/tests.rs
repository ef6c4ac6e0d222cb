//! A server read against a loopback server that lists many sessions: the deadline bounds what a
//! hung server costs, what it left unread keeps its rows, and reads run `max_parallel` at once.

use super::{ServerSource, ServerUrl};
use crate::config::Config;
use crate::jobs::sessions::sources::{Answer, Collected, ReadContext, Source, SourceRead};
use crate::jobs::sessions::tracked::judge;
use agentwatch_store::Store;
use agentwatch_testkit::opencode::{ExportBuilder, healthy_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const SESSIONS: usize = 20;
const NOW_S: i64 = 1_796_000_000;

/// Twenty sessions of two healthy steps each.
fn builders() -> Vec<ExportBuilder> {
    (0..SESSIONS)
        .map(|i| {
            let start = NOW_S * 1000 - 600_000 + i64::try_from(i).unwrap() * 1000;
            ExportBuilder::new(&format!("ses_{i:03}AAAAAAAAAAAAAAAAAAAA"), "t", None, start).steps(
                "build",
                &healthy_calls(2),
                1000,
            )
        })
        .collect()
}

/// opencode's listing and `/session/:id/message?limit=N` (the newest N, oldest first) over
/// `exports`; `answer` decides whether a message request is answered at all.
fn answer_from(exports: &Mutex<Vec<Value>>, request: &Request) -> Reply {
    let exports = exports.lock().unwrap();
    if request.path() == "/experimental/session" {
        let infos: Vec<&Value> = exports.iter().map(|e| &e["info"]).collect();
        return Reply::json(200, &json!(infos));
    }
    let id = request
        .path()
        .strip_prefix("/session/")
        .and_then(|p| p.strip_suffix("/message"));
    let Some(export) = exports
        .iter()
        .find(|e| Some(e["info"]["id"].as_str().unwrap()) == id)
    else {
        return Reply::json(404, &json!({"name": "NotFoundError"}));
    };
    let all = export["messages"].as_array().unwrap();
    let limit: usize = request
        .query("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(all.len());
    Reply::json(200, &json!(all[all.len().saturating_sub(limit)..]))
}

fn config(request_s: f64, deadline_s: Option<f64>, parallel: u32) -> Config {
    let mut config = Config::default();
    config.opencode.request_timeout_s = request_s;
    config.opencode.source_deadline_s = deadline_s;
    config.opencode.max_parallel = parallel;
    config
}

/// One read of the server, its rows stored as a tick stores them; the answer as the tick's
/// [`Collected`] takes it.
fn tick(config: &Config, server: &HttpServer, store: &mut Store) -> (Collected, usize, usize) {
    let source = source(config, server);
    let detector = config.detector();
    let none = HashSet::new();
    let ctx = ReadContext {
        store: Some(store),
        detector: &detector,
        full_read: false,
        cutoff_ms: None,
        now: NOW_S,
        focus: None,
        deadline: config.opencode.source_deadline(),
        watched: &none,
    };
    let name = source.name().to_owned();
    let Answer::Read(mut read) = source.read(&ctx) else {
        panic!("the listing answered");
    };
    let was_read = read.sessions.iter().filter(|s| s.was_read()).count();
    let (_, mut rows) = judge(&mut read.sessions, &detector, NOW_S, Some(store));
    let rows = rows.remove(&name).unwrap_or_default();
    let kept: HashSet<&str> = rows.kept.iter().map(String::as_str).collect();
    store
        .update_session_cache(&name, &rows.written, &kept)
        .unwrap();
    let sessions = read.sessions.len();
    let read = SourceRead {
        sessions: Vec::new(),
        ..read
    };
    let mut collected = Collected::default();
    collected.take(Box::new(source), Answer::Read(read));
    (collected, sessions, was_read)
}

fn source(config: &Config, server: &HttpServer) -> ServerSource {
    let url = ServerUrl {
        url: server.url(),
        optional: false,
        found_in: None,
    };
    ServerSource::new(config, &url, &|_| None)
}

/// A server that lists twenty changed sessions and never answers their message requests costs
/// the tick about one deadline (not twenty request timeouts): the reads run four at a time,
/// what the deadline left is not asked at all, every session keeps its row and cursor (so it
/// is neither gone nor fixed) and the answer is incomplete. With the server healthy again, the
/// next tick reads each session after its kept cursor.
#[test]
fn a_hung_server_costs_one_deadline_and_keeps_every_cursor() {
    let mut builders = builders();
    let exports = Arc::new(Mutex::new(
        builders
            .iter()
            .map(ExportBuilder::build)
            .collect::<Vec<_>>(),
    ));
    let hang = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicUsize::new(0));
    let server = HttpServer::start({
        let (exports, hang, asked) = (Arc::clone(&exports), Arc::clone(&hang), Arc::clone(&asked));
        move |request: &Request| {
            if request.path().ends_with("/message") {
                asked.fetch_add(1, Ordering::SeqCst);
                if hang.load(Ordering::SeqCst) {
                    return Reply::Hang;
                }
            }
            answer_from(&exports, request)
        }
    });
    let dir = TempDir::new("aw-deadline");
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    let (collected, sessions, read) = tick(&config(0.3, None, 4), &server, &mut store);
    assert_eq!(
        (sessions, read, collected.deadline_skipped),
        (SESSIONS, SESSIONS, 0)
    );
    let name = server.url();
    let cursors = |store: &Store| -> Vec<Option<String>> {
        (0..SESSIONS)
            .map(|i| {
                store
                    .session_cursor(&name, &format!("ses_{i:03}AAAAAAAAAAAAAAAAAAAA"))
                    .unwrap()
            })
            .collect()
    };
    let first = cursors(&store);
    assert!(first.iter().all(Option::is_some), "{first:?}");

    // Every session gains a step; the server lists them changed and then answers nothing.
    for b in &mut builders {
        *b = b.clone().steps("build", &healthy_calls(1), 1000);
    }
    *exports.lock().unwrap() = builders.iter().map(ExportBuilder::build).collect();
    hang.store(true, Ordering::SeqCst);
    asked.store(0, Ordering::SeqCst);
    // The deadline defaults to twice the request timeout: 0.6 s.
    let started = Instant::now();
    let (collected, sessions, read) = tick(&config(0.3, None, 4), &server, &mut store);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "five deadlines at most, took {took:?}"
    );
    assert!(
        asked.load(Ordering::SeqCst) <= 8,
        "two rounds of four requests at most, then none: {}",
        asked.load(Ordering::SeqCst)
    );
    // The first four time out on their own (0.3 s), the deadline cuts the next four and
    // leaves the rest unasked.
    let (summary, timeouts) = collected.failed.split_last().unwrap();
    assert!(timeouts.len() <= 4, "{timeouts:?}");
    assert!(
        timeouts
            .iter()
            .all(|(_, why)| why.contains("no answer within"))
    );
    assert_eq!(collected.deadline_skipped + timeouts.len(), SESSIONS);
    assert!(
        summary.1.contains(&format!(
            "{} sessions not read within the source deadline",
            collected.deadline_skipped
        )),
        "{summary:?}"
    );
    assert_eq!(
        (sessions, read),
        (SESSIONS, 0),
        "every row stands, none read"
    );
    assert!(!collected.complete.contains(&name), "not a complete answer");
    assert_eq!(cursors(&store), first, "the cursors are kept");

    hang.store(false, Ordering::SeqCst);
    let (collected, sessions, read) = tick(&config(0.3, None, 4), &server, &mut store);
    assert_eq!(
        (sessions, read, collected.deadline_skipped),
        (SESSIONS, SESSIONS, 0)
    );
    assert!(collected.complete.contains(&name) && collected.failed.is_empty());
    let last = cursors(&store);
    assert!(
        last.iter().zip(&first).all(|(now, then)| now != then),
        "read on past the kept cursors"
    );
}

/// Message reads of one server run `opencode.max_parallel` at once, never more: each message
/// request waits until as many are in flight as the pool allows (or a safety limit passes),
/// and the most seen in flight is the pool's size.
#[test]
fn max_parallel_bounds_the_reads_in_flight() {
    const PARALLEL: usize = 3;
    let exports = Arc::new(Mutex::new(
        builders()
            .iter()
            .map(ExportBuilder::build)
            .collect::<Vec<_>>(),
    ));
    // (in flight now, most in flight seen)
    let gate = Arc::new((Mutex::new((0_usize, 0_usize)), Condvar::new()));
    let server = HttpServer::start({
        let (exports, gate) = (Arc::clone(&exports), Arc::clone(&gate));
        move |request: &Request| {
            if !request.path().ends_with("/message") {
                return answer_from(&exports, request);
            }
            let (lock, filled) = &*gate;
            let mut counts = lock.lock().unwrap();
            counts.0 += 1;
            counts.1 = counts.1.max(counts.0);
            filled.notify_all();
            let (mut counts, _) = filled
                .wait_timeout_while(counts, Duration::from_secs(2), |c| c.1 < PARALLEL)
                .unwrap();
            counts.0 -= 1;
            drop(counts);
            answer_from(&exports, request)
        }
    });
    let dir = TempDir::new("aw-parallel");
    let mut store = Store::open(&dir.path.join("agentwatch.db")).unwrap();
    let config = config(30.0, Some(60.0), u32::try_from(PARALLEL).unwrap());
    let (collected, _, read) = tick(&config, &server, &mut store);
    assert_eq!(read, SESSIONS, "{:?}", collected.failed);
    let most = gate.0.lock().unwrap().1;
    assert_eq!(most, PARALLEL, "most reads in flight at once");
}
