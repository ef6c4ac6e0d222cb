//! `agentwatch --version` names the commit it was built from (cli/build.rs).

use std::process::Command;

#[test]
fn version_names_the_commit_when_built_from_git() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let version = concat!("agentwatch ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(version), "{text}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        // Built from a checkout: `0.1.0 (COMMIT)` or `0.1.0 (COMMIT-dirty)`.
        Some(commit) => assert!(text.contains(&format!("({commit}")), "{text} vs {commit}"),
        // No git: the package version alone.
        None => assert_eq!(text.trim(), version),
    }
}
