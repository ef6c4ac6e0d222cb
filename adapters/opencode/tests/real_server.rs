//! The HTTP client against a real opencode 1.18.33 server, offline on 127.0.0.1.
//!
//! Needs the binary (`.ci/install-opencode.sh`): `#[ignore = "needs opencode"]`, run by CI with
//! `--include-ignored`, where a missing binary fails the test.

use agentwatch_opencode::http::{OpencodeServer, ServerSpec, SourceError, Timeouts};
use agentwatch_opencode::session_from_export;
use agentwatch_testkit::TempDir;
use agentwatch_testkit::opencode::{OpencodeHome, require_binary};
use std::path::PathBuf;
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../../fixtures/opencode/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
#[ignore = "needs opencode"]
fn reads_imported_sessions_from_a_real_server_with_auth() {
    let bin = require_binary();
    let tmp = TempDir::new("aw-oc-real");
    let home = OpencodeHome::new(bin, &tmp.path);
    for f in ["export_fixture_parent.json", "export_fixture_child.json"] {
        home.import(&fixture(f)).unwrap();
    }
    let server = home.serve(Some("s3cret"), Duration::from_secs(30)).unwrap();
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        request: Duration::from_secs(10),
    };

    let anonymous = OpencodeServer::new(ServerSpec::new(server.url()), timeouts);
    assert!(matches!(
        anonymous.list_sessions(),
        Err(SourceError::Unauthorized { .. })
    ));

    let mut spec = ServerSpec::new(server.url());
    spec.password = Some("s3cret".to_owned());
    let client = OpencodeServer::new(spec, timeouts).with_page_size(2);
    assert_eq!(client.health().unwrap()["version"], "1.18.33");
    let (mut sessions, problems) = client.fetch_sessions().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    sessions.sort_by(|a, b| a.id.cmp(&b.id));

    // What the server serves is what the export holds (directory is rebound by import).
    let mut expected: Vec<_> = ["export_fixture_parent.json", "export_fixture_child.json"]
        .iter()
        .map(|f| {
            let v = serde_json::from_str(&std::fs::read_to_string(fixture(f)).unwrap()).unwrap();
            session_from_export(&v).unwrap()
        })
        .collect();
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(sessions.len(), 2);
    for (got, want) in sessions.iter().zip(&expected) {
        assert_eq!(got.id, want.id);
        assert_eq!(got.parent_id, want.parent_id);
        assert_eq!(got.calls, want.calls, "calls of {}", got.id);
    }
}
