//! Every page loaded in headless Chromium against a store filled by real ticks: the rendered DOM
//! is checked (rows, badge classes, plots, a channel toggle clicked through the API) and a
//! screenshot taken. `AGENTWATCH_SCREENSHOTS=DIR` keeps the pictures there (docs/ holds them).

mod common;

use agentwatch_store::Store;
use agentwatch_testkit::TempDir;
use common::*;
use std::path::Path;
use std::time::Duration;

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium(profile: &Path, extra: &[String], url: &str) -> String {
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        // Virtual time runs only while the page has no network request pending: the page's
        // scripts and their API calls finish before the DOM is dumped.
        "--virtual-time-budget=15000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    args.push(url.to_owned());
    let out = agentwatch_process::run(CHROMIUM, &args, &[], Duration::from_secs(90))
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {}", out.stderr);
    out.stdout
}

fn dump(profile: &Path, url: &str) -> String {
    chromium(profile, &["--dump-dom".to_owned()], url)
}

fn screenshot(profile: &Path, url: &str, name: &str) {
    let dir = std::env::var_os("AGENTWATCH_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&file);
    chromium(
        profile,
        &[
            format!("--screenshot={}", file.display()),
            "--window-size=1200,820".to_owned(),
        ],
        url,
    );
    let png = std::fs::read(&file).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG"),
        "{} is not a PNG",
        file.display()
    );
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

#[test]
#[ignore = "needs chromium"]
fn every_page_renders_in_chromium() {
    let dir = TempDir::new("aw-web-pages");
    filled(&dir);
    let server = start(options(&dir));
    let url = server.url();
    let profile = dir.path.join("chromium");

    // Loops panel: the looping tree, its red badge, the raw dedup key, a link to its tree page.
    let dom = dump(&profile, &format!("{url}/"));
    assert!(
        dom.contains("data-ready=\"1\""),
        "the script did not finish:\n{dom}"
    );
    assert!(dom.contains("data-loaded=\"1\""), "{dom}");
    assert!(
        dom.contains("<span class=\"badge sev-critical\">critical</span>"),
        "{dom}"
    );
    assert!(
        dom.contains("<code>opencode-loop:ses_demo_build</code>"),
        "{dom}"
    );
    assert!(
        dom.contains("<time datetime=\"2026-09-21T14:13:20Z\">2026-09-21T14:13:20Z</time>"),
        "{dom}"
    );
    assert!(dom.contains("href=\"/trees/ses_demo_build\""), "{dom}");
    assert_eq!(count(&dom, "<tr data-key="), 1);
    screenshot(&profile, &format!("{url}/"), "web-loops");

    // Watchdog card: figures, channels with their toggle state.
    let dom = dump(&profile, &format!("{url}/controls.html"));
    assert!(dom.contains("data-ready=\"1\""), "{dom}");
    assert!(dom.contains("<b id=\"sessions-seen\">3</b>"), "{dom}");
    assert!(dom.contains("<b id=\"flagged\">1/3</b>"), "{dom}");
    assert!(dom.contains("<b id=\"open-alerts\">1</b>"), "{dom}");
    assert!(
        dom.contains("data-channel=\"log\" data-enabled=\"true\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-channel=\"desk\" data-enabled=\"false\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-key=\"watchdog.detector.top_min\""),
        "{dom}"
    );
    screenshot(&profile, &format!("{url}/controls.html"), "web-controls");

    // A click on the log channel's toggle goes through the API into the store and the page.
    let dom = dump(&profile, &format!("{url}/controls.html?click=log"));
    assert!(dom.contains("data-clicked=\"log\""), "{dom}");
    assert!(
        dom.contains("data-channel=\"log\" data-enabled=\"false\""),
        "{dom}"
    );
    let store = Store::open_read_only(&dir.path.join("agentwatch.db")).unwrap();
    let log = store
        .channel_settings()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "log")
        .expect("the click stored a setting");
    assert!(!log.enabled);

    // Tree page: one plot per signal, the threshold drawn, flagged ticks marked.
    let dom = dump(&profile, &format!("{url}/trees/ses_demo_build"));
    assert!(dom.contains("data-ticks=\"3\""), "{dom}");
    assert_eq!(count(&dom, "<svg class=\"signal\""), 5, "{dom}");
    assert_eq!(count(&dom, "class=\"threshold\""), 5);
    assert!(count(&dom, "class=\"flag\"") >= 3);
    assert!(dom.contains("<span class=\"badge sev-critical\">critical</span>"));
    screenshot(&profile, &format!("{url}/trees/ses_demo_build"), "web-tree");

    // Models and recovery pages.
    let dom = dump(&profile, &format!("{url}/models.html"));
    assert!(count(&dom, "<tr class=\"model\">") >= 1, "{dom}");
    screenshot(&profile, &format!("{url}/models.html"), "web-models");
    // The jobs' restart history, as `recover` and `deck` record it.
    {
        use agentwatch_store::{EventKind, JobEvent};
        let restart = |at, job: &str, name: &str, result: &str| JobEvent {
            at,
            job: job.into(),
            kind: EventKind::Restart,
            name: name.into(),
            result: result.into(),
            duration_ms: None,
        };
        Store::open(&dir.path.join("agentwatch.db"))
            .unwrap()
            .record_events(&[
                restart(T0 + 120, "recover", "flysim.service", "succeeded"),
                restart(T0 + 240, "deck", "conductor-ops", "failed"),
                restart(T0 + 300, "deck", "conductor-ops", "succeeded"),
            ])
            .unwrap();
    }
    let dom = dump(&profile, &format!("{url}/recovery.html"));
    assert!(dom.contains("data-phase=\"idle\""), "{dom}");
    assert_eq!(count(&dom, "<tr class=\"restart result-ok\">"), 2, "{dom}");
    assert_eq!(count(&dom, "<tr class=\"restart result-bad\">"), 1, "{dom}");
    assert!(dom.contains("<code>flysim.service</code>"), "{dom}");
    screenshot(&profile, &format!("{url}/recovery.html"), "web-recovery");
}

#[test]
#[ignore = "needs chromium"]
fn a_foreign_page_cannot_flip_a_channel() {
    let dir = TempDir::new("aw-web-csrf");
    filled(&dir);
    let server = start(options(&dir));
    let profile = dir.path.join("chromium");
    // A page served from another origin (a second server on another port) posts to ours.
    let evil_dir = TempDir::new("aw-web-evil");
    std::fs::write(
        evil_dir.path.join("evil.html"),
        format!(
            "<!doctype html><body><script>\
             fetch('{url}/api/watchdog/channels', {{method: 'POST', mode: 'no-cors', \
             headers: {{'Content-Type': 'text/plain'}}, body: JSON.stringify({{name: 'log', enabled: false}})}})\
             .finally(() => document.body.dataset.done = '1');\
             </script></body>",
            url = server.url()
        ),
    )
    .unwrap();
    let dom = dump(
        &profile,
        &format!("file://{}", evil_dir.path.join("evil.html").display()),
    );
    assert!(dom.contains("data-done=\"1\""), "{dom}");
    let store = Store::open_read_only(&dir.path.join("agentwatch.db")).unwrap();
    assert!(store.channel_settings().unwrap().is_empty());
}
