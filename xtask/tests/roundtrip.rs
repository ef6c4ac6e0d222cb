//! Round trip: opencode's database -> the fixture exporter -> the backtest.
//!
//! The database is made by a real opencode 1.18.33 (`opencode import`) when the binary is
//! installed (`AGENTWATCH_OPENCODE_BIN`, or `.ci/install-opencode.sh`), else with the exact schema
//! and `opencode import`-shaped rows; `AGENTWATCH_REQUIRE_OPENCODE=1` (CI) makes a missing binary a
//! failure.

use agentwatch_opencode::db::testing::{create_db, insert_export};
use agentwatch_opencode::db::{OpencodeDb, export_fixture, parse_labels};
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::{OpencodeHome, find_binary};
use detect_core::DetectConfig;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

const PARENT: &str = "ses_dd623f63fffee71lHFE8l6hlvY";
const CHILD: &str = "ses_dd6230bdfffe5bR215DEWc1ZCj";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn xtask(args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = xtask::cli::run(
        std::iter::once("xtask").chain(args.iter().copied()),
        &mut out,
        &mut err,
    );
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn an_exported_fixture_backtests() {
    let tmp = TempDir::new("aw-xtask-roundtrip");
    let samples = ["export_fixture_parent.json", "export_fixture_child.json"];
    let db_path = match find_binary() {
        Some(bin) => {
            let home = OpencodeHome::new(bin, &tmp.path);
            for name in samples {
                home.import(&fixture(name)).unwrap();
            }
            home.db_path()
        }
        None => {
            assert!(
                std::env::var("AGENTWATCH_REQUIRE_OPENCODE").is_err(),
                "opencode is required but not installed: run .ci/install-opencode.sh"
            );
            let path = tmp.path.join("opencode.db");
            create_db(&path).unwrap();
            for name in samples {
                let text = std::fs::read_to_string(fixture(name)).unwrap();
                let export: Value = serde_json::from_str(&text).unwrap();
                insert_export(&path, &export, "/home/user/proj").unwrap();
            }
            path
        }
    };
    let db = OpencodeDb::open(&db_path, Duration::from_secs(5)).unwrap();
    let labels = parse_labels(&format!(
        r#"{{"{PARENT}": "must_flag", "{CHILD}": {{"label": "must_flag", "note": "four identical reads"}}}}"#
    ))
    .unwrap();
    let mut told = Vec::new();
    let export = export_fixture(
        &db,
        &labels,
        &mut |f| (f.relative.as_deref() == Some("src/lib.rs")).then_some(3),
        &DetectConfig::default(),
        &mut |done, total| told.push((done, total)),
    )
    .unwrap();
    // The progress bar is told each session as it is done.
    assert_eq!(told, [(1, 2), (2, 2)]);
    let path = tmp.path.join("fixture.json");
    std::fs::write(&path, export.file.to_json_pretty()).unwrap();
    let path = path.to_str().unwrap();

    // Short sessions: the default config judges nothing, so both labels are missed (exit 1)...
    let (code, out, _) = xtask(&["backtest", "--fixture", path]);
    assert_eq!(code, 1, "{out}");
    assert!(out.ends_with("# backtest complete: 0/2 flagged\n"), "{out}");
    // ...and thresholds scaled to their size catch both (exit 0).
    let (code, out, err) = xtask(&[
        "backtest",
        "--fixture",
        path,
        "--json",
        "--set",
        "min_calls=3",
        "--set",
        "top_min=3",
        "--set",
        "cum_min=3",
        "--set",
        "window=10",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["must_flag"]["flagged"], 2);
    assert_eq!(v["sessions"][1]["root"], PARENT);
    let child_signals = v["sessions"][1]["signals"].as_array().unwrap();
    assert!(child_signals.iter().any(|s| s == "coverage"), "{out}");
}
