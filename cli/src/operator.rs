//! Operator commands, the design's admin surfaces on the command line:
//! `status`, `alerts`, `channels`, `test-alert` and `config`. Each has `--json`.

use crate::clock::{host_name, iso8601, now_or_clock};
use crate::config::{self, Config, Env, parse_severity};
use crate::exit::{CliError, CliResult, code};
use crate::notify::{apply_stored_settings, send};
use crate::stored::{open_existing_read_only as open_read_only, store_err, store_path, take_lock};
use agentwatch_store::{ChannelSetting, Store};
use alert_state::{AlertEvent, EventState};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options every operator command shares.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The SQLite database.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn load(common: &Common, env: Env<'_>) -> Result<(Config, PathBuf), CliError> {
    let loaded = config::load(common.config.as_deref(), &[], env)?;
    let db = store_path(&loaded.config, common.db.as_deref(), env);
    Ok((loaded.config, db))
}

fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Last tick, sessions seen, flagged/total verdicts, open alerts, channels.
pub fn status(args: StatusArgs) -> CliResult {
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    let store = open_read_only(&db)?;
    let (tick, counts, open) = match &store {
        Some(s) => {
            let tick = s.last_tick().map_err(store_err)?;
            let counts = match &tick {
                Some(t) => Some(s.verdict_counts(t.id).map_err(store_err)?),
                None => None,
            };
            apply_stored_settings(&mut config, s);
            (tick, counts, s.alerts(false).map_err(store_err)?.len())
        }
        None => (None, None, 0),
    };
    let channels: Vec<serde_json::Value> = config
        .channels
        .iter()
        .map(|c| json!({"name": c.name, "type": c.channel_type, "enabled": c.enabled, "min_severity": c.min_severity, "rate_limit_s": c.rate_limit_s}))
        .collect();
    if args.common.json {
        print_json(&json!({
            "db": db.display().to_string(),
            "last_tick": tick,
            "verdicts": counts,
            "open_alerts": open,
            "channels": channels,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    println!("database: {}", db.display());
    match &tick {
        Some(t) => {
            println!(
                "last tick: {} ({}), outcome {}",
                iso8601(t.ticked_at),
                t.ticked_at,
                t.outcome
            );
            println!("sessions seen: {}", t.sessions_seen);
            if let Some(c) = counts {
                println!("flagged verdicts: {}/{}", c.flagged, c.total);
            }
        }
        None => println!("last tick: never"),
    }
    println!("open alerts: {open}");
    if config.channels.is_empty() {
        println!("channels: none configured");
    }
    for c in &config.channels {
        println!(
            "channel {} type={} enabled={} min_severity={} rate_limit_s={}",
            c.name, c.channel_type, c.enabled, c.min_severity, c.rate_limit_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct AlertsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Include resolved alerts.
    #[arg(long)]
    pub all: bool,
}

/// Open alerts (or all with `--all`), newest first.
pub fn alerts(args: AlertsArgs) -> CliResult {
    let env: Env<'_> = &config::process_env;
    let (_, db) = load(&args.common, env)?;
    let rows = match open_read_only(&db)? {
        Some(s) => s.alerts(args.all).map_err(store_err)?,
        None => Vec::new(),
    };
    if args.common.json {
        print_json(&json!({ "alerts": rows }));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no {}alerts", if args.all { "" } else { "open " });
    }
    for a in &rows {
        println!(
            "{} {} {} opened={} flagged_ticks={} {}{}",
            a.severity,
            a.dedup_key,
            a.state,
            iso8601(a.opened_at),
            a.flagged_ticks,
            a.title,
            a.resolved_at
                .map(|t| format!(" resolved={}", iso8601(t)))
                .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct ChannelsArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub action: Option<ChannelsAction>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ChannelsAction {
    /// Change a channel's run-time settings (stored in the database, over the config file's).
    Set {
        name: String,
        #[arg(long)]
        enabled: Option<bool>,
        #[arg(long)]
        min_severity: Option<String>,
        /// Time of the change, unix seconds (default the clock).
        #[arg(long)]
        now: Option<i64>,
    },
}

/// List channels, or change one.
pub fn channels(args: ChannelsArgs) -> CliResult {
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    if let Some(ChannelsAction::Set {
        name,
        enabled,
        min_severity,
        now,
    }) = &args.action
    {
        let Some(section) = config.channels.iter().find(|c| &c.name == name) else {
            let known: Vec<&str> = config.channels.iter().map(|c| c.name.as_str()).collect();
            return Err(CliError::new(
                code::USAGE,
                format!(
                    "no channel named {name:?} (configured: {})",
                    known.join(", ")
                ),
            ));
        };
        if let Some(s) = min_severity {
            parse_severity(s)
                .map_err(|e| CliError::new(code::USAGE, format!("--min-severity: {e}")))?;
        }
        let _lock = take_lock(&db, "channels")?;
        let mut store = Store::open(&db).map_err(store_err)?;
        let current = store
            .channel_settings()
            .map_err(store_err)?
            .into_iter()
            .find(|s| &s.name == name);
        let setting = ChannelSetting {
            name: name.clone(),
            enabled: enabled
                .or(current.as_ref().map(|c| c.enabled))
                .unwrap_or(section.enabled),
            min_severity: min_severity
                .clone()
                .or(current.map(|c| c.min_severity))
                .unwrap_or_else(|| section.min_severity.clone()),
            updated_at: now_or_clock(*now),
        };
        store.set_channel_setting(&setting).map_err(store_err)?;
        eprintln!(
            "channel={} enabled={} min_severity={} action=saved",
            setting.name, setting.enabled, setting.min_severity
        );
        apply_stored_settings(&mut config, &store);
    } else if let Some(store) = open_read_only(&db)? {
        apply_stored_settings(&mut config, &store);
    }
    if args.common.json {
        print_json(&json!({ "channels": config.channels }));
        return Ok(ExitCode::SUCCESS);
    }
    if config.channels.is_empty() {
        println!("no channels configured");
    }
    for c in &config.channels {
        println!(
            "{} type={} enabled={} min_severity={} rate_limit_s={}",
            c.name, c.channel_type, c.enabled, c.min_severity, c.rate_limit_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct TestAlertArgs {
    #[command(flatten)]
    pub common: Common,
    /// info, warning or critical.
    #[arg(long, default_value = "warning")]
    pub severity: String,
    /// Only this channel (default every enabled channel the severity passes).
    #[arg(long)]
    pub channel: Option<String>,
    /// Show what would be sent without sending.
    #[arg(long)]
    pub dry_run: bool,
    /// Time of the test, unix seconds (default the clock).
    #[arg(long)]
    pub now: Option<i64>,
}

/// Send a test event through the channels, bypassing the rate limit.
pub fn test_alert(args: TestAlertArgs) -> CliResult {
    let env: Env<'_> = &config::process_env;
    let (mut config, db) = load(&args.common, env)?;
    if let Some(store) = open_read_only(&db)? {
        apply_stored_settings(&mut config, &store);
    }
    let severity = parse_severity(&args.severity)
        .map_err(|e| CliError::new(code::USAGE, format!("--severity: {e}")))?;
    let now = now_or_clock(args.now);
    let alert_config = config.alert_config(&host_name());
    let event = AlertEvent {
        dedup_key: "agentwatch-test".to_owned(),
        severity,
        state: EventState::Trigger,
        title: "agentwatch test alert".to_owned(),
        summary: format!("test alert sent at {}", iso8601(now)),
        details: json!({"test": true}),
        source: alert_config.source.clone(),
    };
    let targets: Vec<&config::ChannelSection> = config
        .channels
        .iter()
        .filter(|c| match &args.channel {
            Some(name) => &c.name == name,
            None => c.enabled && parse_severity(&c.min_severity).is_ok_and(|m| severity >= m),
        })
        .collect();
    if let Some(name) = &args.channel
        && targets.is_empty()
    {
        return Err(CliError::new(
            code::USAGE,
            format!("no channel named {name:?}"),
        ));
    }
    let reports: Vec<_> = targets
        .iter()
        .map(|c| send(&config, &c.name, &event, args.dry_run, env))
        .collect();
    if args.common.json {
        print_json(&json!({"event": event, "sends": reports}));
    } else {
        if reports.is_empty() {
            println!("no enabled channel takes severity {}", severity.as_str());
        }
        for r in &reports {
            println!(
                "{}: {}{}",
                r.channel,
                r.result,
                r.message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            );
        }
    }
    let failed = reports.iter().any(|r| r.result == "failed");
    Ok(if failed {
        ExitCode::from(code::UNAVAILABLE)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override a key, as the watch commands take it (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print JSON instead of TOML.
    #[arg(long)]
    pub json: bool,
}

/// Print the effective configuration (and the files it came from).
pub fn show_config(args: ConfigArgs) -> CliResult {
    let env: Env<'_> = &config::process_env;
    let loaded = config::load(args.config.as_deref(), &args.set, env)?;
    if args.json {
        print_json(&json!({"files": loaded.files, "config": loaded.config}));
        return Ok(ExitCode::SUCCESS);
    }
    if loaded.files.is_empty() {
        println!("# no configuration file: defaults");
    }
    for f in &loaded.files {
        println!("# from {}", f.display());
    }
    print!("{}", loaded.config.to_toml());
    Ok(ExitCode::SUCCESS)
}
