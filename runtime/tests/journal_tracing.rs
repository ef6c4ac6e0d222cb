//! An embedder's view of the journal: a program that calls the runtime with its own `tracing`
//! subscriber installed receives every journal line as an event (target `agentwatch`, the level
//! of the line's priority) with its fields, and none of it reaches standard error through
//! agentwatch's own formatter.

use agentwatch_runtime::jobs::sessions;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

const T: i64 = 1_796_000_000;

/// One event as the embedder's subscriber saw it.
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    level: Level,
    fields: Vec<(&'static str, String)>,
}

impl Seen {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The embedder's subscriber: keeps every event it is given.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

struct Fields(Vec<(&'static str, String)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), value.to_owned()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name(), format!("{value:?}")));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(Seen {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn an_embedders_subscriber_receives_the_journal_with_its_fields() {
    let dir = std::env::temp_dir().join(format!("aw-journal-embedder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let recorder = Recorder::default();
    let report = tracing::subscriber::with_default(recorder.clone(), || {
        sessions::run(&sessions::Options {
            once: true,
            demo: true,
            config: Some(config.clone()),
            db: Some(dir.join("agentwatch.db")),
            now: Some(T),
            ..sessions::Options::default()
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    let report = report
        .expect("the demo tick runs")
        .expect("the watchdog is enabled");
    let seen = recorder.0.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for event in &seen {
        assert_eq!(event.target, "agentwatch", "{event:?}");
        // The line's time is the tick's `now`, a field, never the formatter's clock.
        assert_eq!(event.get("now"), Some(T.to_string().as_str()), "{event:?}");
        assert!(event.get("journal").is_some(), "{event:?}");
    }
    // The tick's closing line, with its fields in order.
    let done = seen
        .iter()
        .find(|e| e.get("tick") == Some("done"))
        .expect("a tick done line");
    assert_eq!(done.level, Level::INFO);
    assert_eq!(done.get("journal"), Some("watchdog"));
    let names: Vec<&str> = done.fields.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            "journal",
            "now",
            "tick",
            "outcome",
            "sessions",
            "trees",
            "flagged",
            "fired",
            "still_flagged"
        ]
    );
    assert_eq!(done.get("fired"), Some(report.fired().to_string().as_str()));
    // The demo's opencode loop fires: an alert line at the level of its severity, its title a
    // field (the demo's Claude Code and Codex loops have theirs too).
    let alert = seen
        .iter()
        .find(|e| {
            e.get("journal") == Some("alert")
                && e.get("dedup")
                    .is_some_and(|d| d.starts_with("opencode-loop:"))
        })
        .expect("an alert line");
    assert!(
        matches!(alert.level, Level::ERROR | Level::WARN),
        "{alert:?}"
    );
    assert!(
        alert
            .get("dedup")
            .is_some_and(|d| d.starts_with("opencode-loop:")),
        "{alert:?}"
    );
    assert!(alert.get("title").is_some(), "{alert:?}");
}
