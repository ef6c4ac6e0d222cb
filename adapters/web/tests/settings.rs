//! Issue 37: every page shows each setting as configured. The real `agentwatch serve` runs
//! against a configuration with every boolean one way, then the other; each page is loaded in
//! headless Chromium and every checkbox, select and number on it is read as a person sees it
//! (the live DOM property, not the markup) and compared with the configuration. Also: times on
//! the server-rendered pages read as ISO 8601 without the script.

mod common;

use agentwatch_testkit::TempDir;
use common::cdp::Browser;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

/// `agentwatch ARGS` serving on a free loopback port (`serve` says where on standard output,
/// `run` in its journal line on standard error), killed when dropped.
struct Serve {
    child: Child,
    url: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn launch(dir: &Path, args: &[&str]) -> Serve {
    let mut child =
        agentwatch_testkit::isolated_command(agentwatch_bin().to_str().expect("a UTF-8 path"), dir)
            .args(args)
            .arg("--db")
            .arg(dir.join("agentwatch.db"))
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agentwatch starts");
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (tx, rx) = std::sync::mpsc::channel();
    for lines in [
        Box::new(BufReader::new(stdout.expect("stdout"))) as Box<dyn BufRead + Send>,
        Box::new(BufReader::new(stderr.expect("stderr"))),
    ] {
        let tx = tx.clone();
        // Each stream read to its end on its own thread, so the child never blocks on a pipe.
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                let at = line
                    .find("listening on http://")
                    .map(|i| i + "listening on ".len())
                    .or_else(|| {
                        line.find("listening=http://")
                            .map(|i| i + "listening=".len())
                    });
                if let Some(at) = at {
                    let url = line[at..].split_whitespace().next().unwrap_or("");
                    let _ = tx.send(url.to_owned());
                }
            }
        });
    }
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the server says where it listens");
    Serve { child, url }
}

/// A configuration with every boolean the pages show set to `on`, numbers away from their
/// defaults, and two channels (one enabled as `on` says, one the other way).
fn config(on: bool) -> String {
    format!(
        "[serve]\nenabled = true\nlisten = \"127.0.0.1:0\"\n\n[run]\njobs = [\"watch\"]\n\n\
         [opencode]\ndb = \"/nonexistent/opencode.db\"\n\n[watchdog]\nenabled = {on}\nlocal_llm_enabled = {on}\n\n[watchdog.detector]\n\
         top_min = 14\ndup_min = 0.3\n\n\
         [[channels]]\nname = \"log\"\ntype = \"log\"\npath = \"alerts.jsonl\"\nenabled = {on}\nmin_severity = \"critical\"\n\n\
         [[channels]]\nname = \"desk\"\ntype = \"desktop\"\nenabled = {off}\nmin_severity = \"info\"\nprogram = \"/nonexistent/notify-send\"\n",
        off = !on
    )
}

/// Every form control on the page: `{selector-ish name: value}` where a checkbox is its
/// `checked`, a number its value as a number, a select its value.
const CONTROLS: &str = "(() => { const out = {}; \
    for (const e of document.querySelectorAll('input, select')) { \
      const name = (e.dataset.key || ('channel:' + e.dataset.channel + ':' + e.className) || e.id); \
      out[name] = e.type === 'checkbox' ? e.checked : e.type === 'number' ? Number(e.value) : e.value; \
    } return out; })()";

#[test]
#[ignore = "needs chromium"]
fn every_page_shows_each_setting_as_configured() {
    // Each row: every boolean in the file, the command, what `local_llm_enabled` is in force.
    // `run --set` is how the page came to show it on while the jobs ran with it off.
    let rows: &[(bool, &[&str], bool)] = &[
        (false, &["serve", "--listen", "127.0.0.1:0"], false),
        (true, &["serve", "--listen", "127.0.0.1:0"], true),
        (
            true,
            &["run", "--set", "watchdog.local_llm_enabled=false"],
            false,
        ),
        (
            false,
            &["run", "--set", "watchdog.local_llm_enabled=true"],
            true,
        ),
    ];
    for (on, args, llm) in rows.iter().copied() {
        let dir = TempDir::new("aw-web-settings");
        std::fs::write(dir.path.join("config.toml"), config(on)).unwrap();
        let server = launch(&dir.path, args);
        let mut browser = Browser::launch(&dir.path.join("chromium"));
        let mut seen = serde_json::Map::new();
        for page in ["/", "/controls.html", "/models.html", "/recovery.html"] {
            browser.goto(&format!("{}{page}", server.url));
            if page == "/controls.html" {
                browser.wait_for(
                    "document.querySelector('#watchdog').dataset.loaded === '1' && \
                     document.querySelectorAll('#config input').length > 0",
                );
            }
            let controls = browser.eval(CONTROLS).unwrap();
            for (name, value) in controls.as_object().expect("an object") {
                seen.insert(name.clone(), value.clone());
            }
        }
        let want = json!({
            "watchdog.enabled": on,
            "watchdog.local_llm_enabled": llm,
            "watchdog.detector.top_min": 14,
            "watchdog.detector.dup_min": 0.3,
            "channel:log:toggle": on,
            "channel:log:min-severity": "critical",
            "channel:desk:toggle": !on,
            "channel:desk:min-severity": "info",
        });
        for (name, value) in want.as_object().unwrap() {
            assert_eq!(
                seen.get(name),
                Some(value),
                "{name} with every boolean {on} ({args:?}): the page shows {:?}; all: {seen:#?}",
                seen.get(name)
            );
        }
        // Every boolean on any page is one the configuration set, and shown as it says.
        for (name, value) in &seen {
            if let Value::Bool(_) = value {
                assert!(want.get(name).is_some(), "{name} is not checked: {seen:#?}");
            }
        }
    }
}

/// The tree, models and recovery pages are rendered on the server: their times read as ISO
/// 8601 in the markup itself, never as unix seconds.
#[test]
fn server_rendered_times_are_iso_8601() {
    let dir = TempDir::new("aw-web-times");
    filled(&dir);
    let server = start(options(&dir));
    let page = get(&format!("{}/trees/ses_demo_build", server.url())).body;
    assert!(
        page.contains(
            "<time data-unix=\"1790000000\" datetime=\"2026-09-21T14:13:20+00:00\">2026-09-21T14:13:20+00:00</time>"
        ),
        "{page}"
    );
    for t in 0..3 {
        let raw = format!(">{}<", T0 + t * 300);
        assert!(!page.contains(&raw), "{raw} in {page}");
    }
}
