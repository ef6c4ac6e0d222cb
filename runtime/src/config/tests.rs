//! The configuration's tests: layers, bounds, sections, old names, secrets.

use super::*;
use crate::error::code;

fn no_env(_: &str) -> Option<String> {
    None
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aw-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `run.jobs` by default holds the jobs whose systems are there.
#[test]
fn run_jobs_default_to_the_jobs_whose_systems_are_there() {
    let dir = temp("jobs");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let deck = bin.join("agent-deck");
    std::fs::write(&deck, "#!/bin/sh\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&deck, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = bin.display().to_string();
    let with_deck = move |k: &str| (k == "PATH").then(|| path.clone());
    let recover = "[recover]\nunit = \"sim.service\"\n";
    let listed = "[run]\njobs = [\"opencode\", \"deck\"]\n";
    // (config text, agent-deck on PATH, run.jobs)
    let cases: [(&str, bool, &[JobName]); 5] = [
        ("", false, &[JobName::Watch]),
        ("", true, &[JobName::Watch, JobName::Deck]),
        (
            "[deck]\ninterval_s = 60\n",
            false,
            &[JobName::Watch, JobName::Deck],
        ),
        (recover, false, &[JobName::Watch, JobName::Recover]),
        (listed, false, &[JobName::Watch, JobName::Deck]),
    ];
    for (text, on_path, jobs) in cases {
        let file = write(&dir, "config.toml", text);
        let env: Env<'_> = if on_path { &with_deck } else { &no_env };
        let loaded = load(Some(&file), &[], env).unwrap();
        assert_eq!(loaded.config.run.jobs, jobs, "{text:?} on PATH: {on_path}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn defaults_follow_the_design() {
    let loaded = load(None, &[], &no_env).unwrap();
    let c = loaded.config;
    assert!(c.watchdog.enabled && c.watchdog.local_llm_enabled);
    assert_eq!(c.watchdog.detector, DetectConfig::default());
    assert_eq!(
        (
            c.watchdog.escalate_after_ticks,
            c.watchdog.max_llm_opinions_per_tick
        ),
        (3, 3)
    );
    assert!(loaded.files.is_empty());
}

/// With no config: the seed's registry, opencode's database and port, the journal, and the
/// desktop when notify-send is on PATH. Naming any source or channel replaces the defaults.
#[test]
fn unconfigured_sources_and_channels_default_and_explicit_config_replaces_them() {
    let dir = temp("defaults");
    let bin = dir.join("bin");
    write(&bin, "notify-send", "#!/bin/sh\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        bin.join("notify-send"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let home = dir.join("home");
    let (home_s, bin_s) = (home.display().to_string(), bin.display().to_string());
    // (config file, notify-send on PATH, servers, default registry+db, channels)
    type Case<'a> = (&'a str, bool, &'a [&'a str], bool, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        // (config file, notify-send on PATH, servers, default registry+db, channels)
        (
            "",
            true,
            &[DEFAULT_OPENCODE_SERVER],
            true,
            &["journal", "desktop"],
        ),
        ("", false, &[DEFAULT_OPENCODE_SERVER], true, &["journal"]),
        (
            "[opencode]\nservers = [\"http://h:1\"]\n",
            true,
            &["http://h:1"],
            false,
            &["journal", "desktop"],
        ),
        (
            "[opencode]\nservers = []\n",
            false,
            &[],
            false,
            &["journal"],
        ),
        (
            "[opencode]\ndb = \"/x.db\"\n",
            false,
            &[],
            false,
            &["journal"],
        ),
        (
            "channels = []\n",
            true,
            &[DEFAULT_OPENCODE_SERVER],
            true,
            &[],
        ),
        (
            "[[channels]]\nname = \"mine\"\ntype = \"log\"\n",
            true,
            &[DEFAULT_OPENCODE_SERVER],
            true,
            &["mine"],
        ),
    ];
    for (i, (text, on_path, servers, default_files, channels)) in cases.iter().enumerate() {
        let file = write(&dir, &format!("c{i}.toml"), text);
        let env = |k: &str| match k {
            "HOME" => Some(home_s.clone()),
            "PATH" if *on_path => Some(bin_s.clone()),
            _ => None,
        };
        let c = load(Some(&file), &[], &env).unwrap().config;
        assert_eq!(c.opencode.servers, *servers, "case {i}: {text}");
        assert_eq!(c.defaulted.sources, *default_files, "case {i}");
        let data = home.join(".local/share/opencode");
        let registry = default_files.then(|| data.join("rc-servers.json").display().to_string());
        assert_eq!(c.opencode.registry, registry, "case {i}");
        let names: Vec<&str> = c.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, *channels, "case {i}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_without_its_scheme_is_refused_naming_the_fix() {
    for (url, ok) in [
        ("http://127.0.0.1:4096", true),
        ("HTTPS://h", true),
        ("localhost:4096", false),
        ("http://", false),
        ("ftp://h", false),
    ] {
        assert_eq!(check_server_url(url).is_ok(), ok, "{url}");
    }
    let e = check_server_url("localhost:4096").unwrap_err();
    assert!(e.contains("http://localhost:4096"), "{e}");
    let dir = temp("scheme");
    let file = write(
        &dir,
        "c.toml",
        "[opencode]\nservers = [\"localhost:4096\"]\n",
    );
    let e = load(Some(&file), &[], &no_env).unwrap_err();
    assert_eq!(e.exit_code(), code::CONFIG);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn file_then_overlay_then_env_then_flags() {
    let dir = temp("layers");
    let main = write(
        &dir,
        "config.toml",
        "[watchdog.detector]\nwindow = 50\ntop_min = 11\n[store]\npath = \"/from/file.db\"\n",
    );
    write(
        &dir,
        "config.local.toml",
        "[watchdog.detector]\ntop_min = 9\n",
    );
    let env = |k: &str| (k == "AGENTWATCH_DB").then(|| "/from/env.db".to_owned());
    let sets = [
        "window=45".to_owned(),
        "watchdog.local_llm_enabled=false".to_owned(),
    ];
    let loaded = load(Some(&main), &sets, &env).unwrap();
    let c = &loaded.config;
    assert_eq!(c.watchdog.detector.top_min, 9, "overlay wins over file");
    assert_eq!(c.watchdog.detector.window, 45, "flag wins over file");
    assert_eq!(
        c.store.path.as_deref(),
        Some("/from/env.db"),
        "env wins over file"
    );
    assert!(!c.watchdog.local_llm_enabled);
    assert_eq!(loaded.files.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each row: file text or flag, what the error must name.
#[test]
fn unknown_keys_and_bad_values_are_named() {
    let dir = temp("bad");
    let rows = [
        ("[watchdog]\nenabeld = true\n", "enabeld"),
        ("[watchdog.detector]\nwindow = 0\n", "window"),
        ("[watchdog.detector]\ndup_min = 2.0\n", "dup_min"),
        ("[watchdog.detector]\ntop_min = \"x\"\n", "top_min"),
        ("[[channels]]\nname = \"a\"\ntype = \"webhook\"\n", "url"),
        (
            "[[channels]]\nname = \"a\"\ntype = \"alertmanager\"\n",
            "urls",
        ),
        (
            "[[channels]]\nname = \"a\"\ntype = \"alertmanager\"\nurls = [\"am:9093\"]\n",
            "urls",
        ),
        (
            "[[channels]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"http://h\"\nmode = \"fax\"\n",
            "ntfy",
        ),
        (
            "[[channels]]\nname = \"a\"\ntype = \"desktop\"\nmin_severity = \"loud\"\n",
            "min_severity",
        ),
        ("[watchdog\nbroken", "config.toml"),
        ("[opencode]\nrequest_timeout_s = -1\n", "request_timeout_s"),
        (
            "[opencode]\nrequest_timeout_s = 1e300\n",
            "request_timeout_s",
        ),
        (
            "[watchdog.llm]\ntimeout_s = inf\n",
            "watchdog.llm.timeout_s",
        ),
        (
            "[recover]\nrestart_timeout_s = 1e300\n",
            "recover.restart_timeout_s",
        ),
        (
            "[deck]\ncommand_timeout_s = 1e300\n",
            "deck.command_timeout_s",
        ),
        (
            "[watchdog]\nstale_after_s = 99999999\n",
            "watchdog.stale_after_s",
        ),
        ("[watchdog]\nstale_after_s = -1\n", "stale_after_s"),
        (
            "[[channels]]\nname = \"a\"\ntype = \"log\"\ntimeout_s = 1e300\n",
            "channels[0].timeout_s",
        ),
    ];
    for (text, named) in rows {
        let path = write(&dir, "config.toml", text);
        let err = load(Some(&path), &[], &no_env).unwrap_err();
        assert!(err.to_string().contains(named), "{text:?}: {err}");
        assert_eq!(err.exit_code(), code::CONFIG, "{text:?}");
    }
    // A channel's mistakes fail at load, naming the key and the file that set it (issue 49):
    // an unknown type, a webhook URL without its scheme (never echoed: it may be a secret).
    for (text, named) in [
        (
            "[[channels]]\nname = \"a\"\ntype = \"log\"\n[[channels]]\nname = \"b\"\ntype = \"webhok\"\n",
            "channels[1].type: must be one of",
        ),
        (
            "[[channels]]\nname = \"h\"\ntype = \"webhook\"\nurl = \"hooks.example/T0/SECRET\"\n",
            "channels[0].url: must start with http:// or https://",
        ),
    ] {
        let path = write(&dir, "config.toml", text);
        let err = load(Some(&path), &[], &no_env).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.starts_with(&format!("{}: {named}", path.display())),
            "{shown}"
        );
        assert!(
            !shown.contains("webhok") && !shown.contains("SECRET"),
            "{shown}"
        );
        assert_eq!(err.exit_code(), code::CONFIG);
    }
    let set = ["channels=[{name = \"x\", type = \"pigeon\"}]".to_owned()];
    let err = load(None, &set, &no_env).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--set channels: channels[0].type"),
        "{err}"
    );
    let err = load(None, &["watchdog.nonsense=1".to_owned()], &no_env).unwrap_err();
    assert!(err.to_string().contains("nonsense"), "{err}");
    // A config file that cannot be read at all is a configuration error too (78).
    let err = load(Some(&dir.join("missing.toml")), &[], &no_env).unwrap_err();
    assert_eq!(err.exit_code(), code::CONFIG);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Config errors name the key (or the line and column of a syntax error) and never echo
/// the value or the offending line: a secret put in the wrong place must not reach a
/// terminal or a journal through an error.
#[test]
fn detect_and_xtask_read_set_flags_in_the_config_dialect() {
    let flags = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
        detector_from_flags(None, &sets)
    };
    let agents = |c: DetectConfig| c.read_only_agents;
    let plan_explore = vec!["plan".to_owned(), "explore".to_owned()];
    for sets in [
        &["read_only_agents=plan,explore"][..],
        &["read_only_agents=[\"plan\", \"explore\"]"],
        &["watchdog.detector.read_only_agents=plan, explore"],
        &["read_only_agent_keywords=plan,explore"],
    ] {
        assert_eq!(agents(flags(sets).unwrap()), plan_explore, "{sets:?}");
    }
    let precise = detector_from_flags(Some("precise"), &[]).unwrap();
    assert_eq!(flags(&["profile=\"precise\""]).unwrap(), precise);
    assert_eq!(
        flags(&["watchdog.detector.profile=precise"]).unwrap(),
        precise
    );
    let tuned = flags(&["top_min=10", "watchdog.detector.dup_min=1", "window=30"]).unwrap();
    assert_eq!((tuned.top_min, tuned.dup_min, tuned.window), (10, 1.0, 30));
    // The same flags mean the same through the full loader.
    let sets = vec![
        "top_min=10".to_owned(),
        "read_only_agents=plan,explore".to_owned(),
    ];
    let loaded = load(None, &sets, &no_env).unwrap().config;
    assert_eq!(loaded.watchdog.detector.top_min, 10);
    assert_eq!(loaded.watchdog.detector.read_only_agents, plan_explore);

    for (sets, names) in [
        (&["opencode.db=/x"][..], "opencode.db"),
        (&["top_min=many"], "top_min"),
        (&["window=0"], "window"),
        (&["top_min"], "KEY=VALUE"),
        (&["bogus_key=1"], "bogus_key"),
    ] {
        let err = flags(sets).unwrap_err().to_string();
        assert!(err.contains(names), "{sets:?}: {err}");
        assert!(!err.contains("many"), "a value is never echoed: {err}");
    }
}

#[test]
fn every_config_read_error_is_a_config_error_naming_the_file() {
    let dir = temp("read-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.toml");
    std::fs::write(&garbage, [0x7f, b'E', b'L', b'F', 0xff, 0xfe, 0x00, 0x9c]).unwrap();
    let half = dir.join("half.toml");
    std::fs::write(&half, "[watchdog]\nstale_after_s = 12").unwrap();
    std::fs::write(&half, "[watchdog\nstale_af").unwrap();
    let missing = dir.join("missing.toml");
    for (path, says) in [
        (&garbage, "not UTF-8 text"),
        (&half, "half.toml"),
        (&missing, "missing.toml"),
        (&dir, "read-errors"),
    ] {
        let err = load(Some(path), &[], &no_env).unwrap_err();
        assert_eq!(err.exit_code(), 78, "{}: {err}", path.display());
        let shown = err.to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains(says), "{shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_errors_name_the_key_and_never_echo_the_value() {
    const SECRET: &str = "sk-live-SECRET123";
    let dir = temp("secret-errors");
    let files = [
        (
            format!("[watchdog]\nmodel = {SECRET}\n"),
            "line 2, column 9",
        ),
        (
            format!("[watchdog]\nmodel = \"ok\"\nenabled = \"{SECRET}\"\n"),
            "watchdog.enabled",
        ),
        (
            format!("[watchdog]\nescalate_after_ticks = \"{SECRET}\"\n"),
            "watchdog.escalate_after_ticks",
        ),
        (
            format!("[watchdog.llm]\ndialect = \"{SECRET}\"\n"),
            "watchdog.llm.dialect",
        ),
        (
            format!(
                "[[channels]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"https://h/x\"\nmode = \"{SECRET}\"\n"
            ),
            "channels[0].mode",
        ),
        (
            format!("[[channels]]\nname = \"a\"\ntype = \"log\"\nmin_severity = \"{SECRET}\"\n"),
            "channels[0].min_severity",
        ),
        (format!("[serve]\nlisten = \"{SECRET}\"\n"), "serve.listen"),
        (
            format!("[watchdog]\nenabled = [\"{SECRET}\", 1]\n"),
            "watchdog.enabled: invalid type: sequence",
        ),
    ];
    for (text, named) in &files {
        let path = write(&dir, "config.toml", text);
        let err = load(Some(&path), &[], &no_env).unwrap_err().to_string();
        assert!(err.contains(named), "{text:?}: {err}");
        assert!(!err.contains("SECRET123"), "{text:?} echoed: {err}");
        assert!(!err.contains('\n'), "{text:?}: one line: {err}");
    }
    for set in [
        format!("watchdog.enabled=\"{SECRET}\""),
        format!("watchdog.enabled={SECRET}"),
        format!("top_min={SECRET}"),
        format!("watchdog.stale_after_s=\"{SECRET}\""),
    ] {
        let err = load(None, std::slice::from_ref(&set), &no_env)
            .unwrap_err()
            .to_string();
        let key = set.split('=').next().unwrap_or_default();
        assert!(
            err.contains(key.rsplit('.').next().unwrap_or(key)),
            "{set}: {err}"
        );
        assert!(!err.contains("SECRET123"), "{set} echoed: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A generated table of `docs/configuration.md` is the code's (`AGENTWATCH_BLESS_README=1`
/// rewrites them): the bounds (`BOUNDS`) and every key with its default.
#[test]
fn the_configuration_page_lists_every_bound_and_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    for (name, made) in [("bounds", bounds_table()), ("keys", keys_table())] {
        let page = std::fs::read_to_string(&path).unwrap();
        let start = format!(
            "<!-- {name}:start (runtime/src/config/bounds.rs; a test keeps this table in step) -->\n"
        );
        let end = format!("<!-- {name}:end -->");
        let (head, rest) = page.split_once(&start).expect("the table's start");
        let (table, tail) = rest.split_once(&end).expect("its end");
        if std::env::var_os("AGENTWATCH_BLESS_README").is_some() {
            std::fs::write(&path, format!("{head}{start}{made}{end}{tail}")).unwrap();
            continue;
        }
        assert_eq!(table, made, "{name}: run with AGENTWATCH_BLESS_README=1");
    }
}

/// Each bound refuses the value past it and takes the value at it, by file and by `--set`.
#[test]
fn every_bound_is_enforced_at_both_ends() {
    for b in BOUNDS {
        let key = b.key.replace("channels[].", "channels.0.");
        if key.starts_with("channels.") {
            continue;
        }
        for (value, ok) in [
            (b.max, true),
            (b.max + 1.0, false),
            (b.min, !b.min_exclusive),
        ] {
            let literal = if b.max.fract() == 0.0 && b.min.fract() == 0.0 && !b.min_exclusive {
                format!("{}", value as i64)
            } else {
                format!("{value:?}")
            };
            let mut sets = vec![format!("{key}={literal}")];
            if key == "watchdog.detector.top_min" || key == "watchdog.detector.top_min_ro" {
                sets.push(format!(
                    "watchdog.detector.window={}",
                    MAX_DETECTOR_COUNT as i64
                ));
            }
            if key == "watchdog.detector.window" && value < 12.0 {
                sets.push("top_min=1".to_owned());
                sets.push("top_min_ro=1".to_owned());
            }
            let got = load(None, &sets, &no_env);
            assert_eq!(got.is_ok(), ok, "{sets:?}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains(&key), "{key}: {e}");
            }
        }
    }
}

/// What counts as a secret worth a warning in a readable config file.
#[test]
fn secrets_in_config_text_are_recognised() {
    let rows = [
        ("[[channels]]\nurl = \"https://h/x?token=abc\"\n", true),
        (
            "[[channels]]\nurl = \"https://hooks.slack.com/services/T000/B000/XXXX\"\n",
            true,
        ),
        (
            "[opencode]\nservers = [\"http://user:pw@host:4096\"]\n",
            true,
        ),
        ("[[channels]]\nbot_token = \"123:abc\"\n", true),
        ("[[channels]]\nurl = \"https://h/events\"\n", false),
        ("[[channels]]\nrouting_key_env = \"PD_KEY\"\n", false),
        (
            "[opencode]\npassword_env = \"OPENCODE_SERVER_PASSWORD\"\n",
            false,
        ),
        ("not toml [", false),
    ];
    for (text, secret) in rows {
        assert_eq!(holds_secret(text), secret, "{text:?}");
    }
}

#[test]
fn printed_config_loads_back_identical() {
    let sets = [
        "top_min=7".to_owned(),
        "opencode.servers=[\"http://127.0.0.1:4096\"]".to_owned(),
    ];
    let c = load(None, &sets, &no_env).unwrap().config;
    let mut back: Config = toml::from_str(&c.to_toml()).unwrap();
    // Which parts were defaults is known to `load`, not written to the file.
    assert!(c.defaulted.channels && !back.defaulted.channels);
    back.defaulted = c.defaulted;
    assert_eq!(back, c);
}

#[test]
fn the_design_model_fallback_and_local_compute_gate() {
    let effective = |text: &str, sets: &[&str]| {
        let dir = temp("model");
        let path = write(&dir, "config.toml", text);
        let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
        load(Some(&path), &sets, &no_env).unwrap().config
    };
    let c = effective("", &[]);
    assert_eq!(c.llm_model(), DEFAULT_LLM_MODEL);
    assert!(c.local_llm_enabled());
    let both = "[watchdog]\nmodel = \"mine\"\n[verification]\nmodel = \"verifier\"\n";
    assert_eq!(effective(both, &[]).llm_model(), "mine");
    // `null` (TOML has none) or an absent key falls back to `verification.model`.
    let unset = effective(both, &["watchdog.model=null"]);
    assert_eq!(unset.watchdog.model, None, "never the text \"null\"");
    assert_eq!(unset.llm_model(), "verifier");
    assert_eq!(
        effective("[verification]\nmodel = \"verifier\"\n", &[]).llm_model(),
        "verifier"
    );
    assert_eq!(
        effective(both, &["watchdog.model=\"\""]).llm_model(),
        "verifier"
    );
    // Either gate off keeps the local model off.
    let off = effective("[local_compute]\nenabled = false\n", &[]);
    assert!(off.watchdog.local_llm_enabled && !off.local_llm_enabled());
    assert!(!off.alert_config("h").local_llm_enabled);
    let off = effective("", &["watchdog.local_llm_enabled=false"]);
    assert!(!off.alert_config("h").local_llm_enabled);
    // Printed, the keys load back the same.
    let printed = unset.to_toml();
    let back: Config = toml::from_str(&printed).unwrap();
    assert_eq!(back.verification, unset.verification);
    assert_eq!(back.watchdog.model, None);
}

#[test]
fn recover_follows_the_spec_variables() {
    let c = load(None, &[], &no_env).unwrap().config.recover;
    // Generic defaults: no unit (recover not set up), the report beside the store, no
    // notice, plain systemctl.
    assert_eq!((c.unit.as_str(), c.report.as_str()), ("", ""));
    assert_eq!((c.notice.as_str(), c.env_file.as_str()), ("", ""));
    assert_eq!(c.systemctl, ["systemctl"]);
    assert_eq!((c.min_probe_gap, c.cooldown, c.countdown), (270, 3600, 60));
    let env = |k: &str| match k {
        "FLY_LOOP_REPORT" => Some("/r/loop.json".to_owned()),
        "FLY_RECOVERY_NOTICE" => Some("/n/notice.json".to_owned()),
        "FLY_LOOP_ROUTER_URL" => Some("http://127.0.0.1:4000/v1".to_owned()),
        "FLY_LOOP_MODEL" => Some("free".to_owned()),
        "WD_LOOP_INTERVAL" => Some("600".to_owned()),
        _ => None,
    };
    let c = load(None, &[], &env).unwrap().config.recover;
    assert_eq!(c.report, "/r/loop.json");
    assert_eq!(c.notice, "/n/notice.json");
    assert_eq!(c.router_url.as_deref(), Some("http://127.0.0.1:4000/v1"));
    assert_eq!(c.model.as_deref(), Some("free"));
    assert_eq!(c.min_probe_gap, 570);
    let bad = |k: &str| (k == "WD_LOOP_INTERVAL").then(|| "5m".to_owned());
    let err = load(None, &[], &bad).unwrap_err();
    assert!(err.to_string().contains("WD_LOOP_INTERVAL"), "{err}");
    for set in ["recover.unit=-x", "recover.systemctl=[]"] {
        let err = load(None, &[set.to_owned()], &no_env).unwrap_err();
        assert_eq!(err.exit_code(), code::CONFIG, "{set}: {err}");
    }
}
