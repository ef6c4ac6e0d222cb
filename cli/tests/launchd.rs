//! The shipped launchd agents (`deploy/launchd/*.plist`, macOS) are property lists launchd can
//! read (parsed by the `plist` crate: XML syntax, the plist DTD's types), and each runs a
//! subcommand this binary has, with arguments it accepts. launchd itself cannot run here.

use std::path::PathBuf;
use std::process::Command;

fn agents() -> Vec<PathBuf> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/launchd");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "plist"))
        .collect();
    found.sort();
    found
}

#[test]
fn every_launchd_agent_parses_and_runs_an_existing_subcommand() {
    let agents = agents();
    let names: Vec<String> = agents
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["dev.agentwatch.deck.plist", "dev.agentwatch.run.plist"]
    );
    for path in &agents {
        let value =
            plist::Value::from_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let agent = value.as_dictionary().expect("a dictionary at the top");
        let text = |key: &str| {
            agent
                .get(key)
                .and_then(plist::Value::as_string)
                .unwrap_or_else(|| panic!("{}: no string {key}", path.display()))
        };
        // The label is the file's name, as launchctl expects.
        let name = path.file_stem().unwrap().to_string_lossy();
        assert_eq!(text("Label"), name);
        let argv: Vec<&str> = agent["ProgramArguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_string().unwrap())
            .collect();
        assert_eq!(
            argv[0], "/Users/YOUR_USER/.cargo/bin/agentwatch",
            "cargo install's path"
        );
        // The binary takes the subcommand and its flags (`--help` parses them first).
        let mut args: Vec<&str> = argv[1..].to_vec();
        args.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_agentwatch"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: agentwatch {args:?}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(argv[1], name.strip_prefix("dev.agentwatch.").unwrap());
        // A tmux server that agent-deck starts outlives the watchdog (KillMode=process).
        assert_eq!(agent["AbandonProcessGroup"].as_boolean(), Some(true));
        assert_eq!(agent["RunAtLoad"].as_boolean(), Some(true));
        let keep_alive = agent["KeepAlive"].as_dictionary().unwrap();
        assert_eq!(keep_alive["SuccessfulExit"].as_boolean(), Some(false));
        // launchd expands nothing: every path is absolute, the one placeholder is the home.
        for key in ["StandardErrorPath", "StandardOutPath"] {
            assert!(
                text(key).starts_with("/Users/YOUR_USER/Library/Logs/"),
                "{key}"
            );
        }
        let env = agent["EnvironmentVariables"].as_dictionary().unwrap();
        assert!(
            env["PATH"]
                .as_string()
                .unwrap()
                .contains("/opt/homebrew/bin")
        );
    }
}
