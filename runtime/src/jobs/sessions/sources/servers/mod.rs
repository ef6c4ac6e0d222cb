//! opencode servers over HTTP: the configured ones, those a registry file lists, and `--server`;
//! each read incrementally ([`read`]).

pub mod read;

use super::{Answer, Collected, ReadContext, Source, SourceRead, configured_sources, count};
use crate::config::{self, Config, Env};
use crate::jobs::sessions::Options;
use agentwatch_opencode::discover;
use agentwatch_opencode::http::{OpencodeServer, ServerSpec, SourceError, Timeouts};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// Server URLs from a registry file (the seed's `rc-servers.json`): a JSON list whose items are
/// URLs, objects with a `url`, or objects with a `port` (and optionally a `hostname` or `host`,
/// default 127.0.0.1); other items are left out.
pub fn registry_servers(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let list = value
        .as_array()
        .ok_or_else(|| format!("{}: expected a JSON list of servers", path.display()))?;
    Ok(list.iter().filter_map(registry_item).collect())
}

/// One registry item's URL, if it names one.
fn registry_item(item: &Value) -> Option<String> {
    match item {
        Value::String(url) => Some(url.clone()),
        Value::Object(o) => o
            .get("url")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                let port = o.get("port").and_then(Value::as_u64)?;
                let host = ["hostname", "host"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))
                    .unwrap_or("127.0.0.1");
                Some(format!("http://{host}:{port}"))
            }),
        _ => None,
    }
}

/// One server to read, and whether it is the default one (skipped quietly when not there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    pub url: String,
    pub optional: bool,
    /// Found listening in an opencode process of this user (its pid), not configured: read
    /// only when `GET /global/health` says it is opencode.
    pub found_in: Option<u32>,
}

/// The servers to read: configured, from the registry, and from flags, each once. Registry
/// entries that are not URLs, a registry that cannot be read, and a missing file go to
/// `collected` (failed, failed, skipped).
pub fn server_urls(
    config: &Config,
    args: &Options,
    env: Env<'_>,
    collected: &mut Collected,
) -> Vec<ServerUrl> {
    let mut urls: Vec<ServerUrl> = Vec::new();
    let configured = configured_sources(config, args);
    if configured && let Some(registry) = &config.opencode.registry {
        urls.extend(registry_urls(
            &config::expand_home(registry, env),
            collected,
        ));
    }
    if configured {
        urls.extend(config.opencode.servers.iter().map(|url| ServerUrl {
            url: url.clone(),
            optional: config.defaulted.sources && url == config::DEFAULT_OPENCODE_SERVER,
            found_in: None,
        }));
    }
    if configured && config.defaulted.sources {
        // The TUI and `opencode serve` without `--port` listen on a random port.
        urls.extend(
            discover::opencode_listeners(Path::new("/proc"), env("HOME").as_deref())
                .into_iter()
                .map(|l| ServerUrl {
                    url: l.url(),
                    optional: true,
                    found_in: Some(l.pid),
                }),
        );
    }
    urls.extend(args.servers.iter().map(|url| ServerUrl {
        url: url.clone(),
        optional: false,
        found_in: None,
    }));
    let mut seen = HashSet::new();
    urls.retain(|u| seen.insert(u.url.trim_end_matches('/').to_owned()));
    urls
}

/// The servers a registry file lists; what it gave or why not goes to `collected`.
fn registry_urls(path: &Path, collected: &mut Collected) -> Vec<ServerUrl> {
    if !path.exists() {
        collected
            .skipped
            .push(("registry".to_owned(), format!("no file {}", path.display())));
        return Vec::new();
    }
    let found = match registry_servers(path) {
        Ok(found) => found,
        Err(e) => {
            collected.failed.push(("registry".to_owned(), e));
            return Vec::new();
        }
    };
    collected
        .read
        .push(format!("registry {}", count(found.len(), "server")));
    let mut urls = Vec::new();
    for url in found {
        match config::check_server_url(&url) {
            Ok(()) => urls.push(ServerUrl {
                url,
                optional: false,
                found_in: None,
            }),
            Err(e) => collected.failed.push(("registry".to_owned(), e)),
        }
    }
    urls
}

/// How long a default server may take to accept a connection before it counts as not there.
const OPTIONAL_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// One opencode server, read incrementally ([`read::read_server`]).
#[derive(Debug)]
pub struct ServerSource {
    server: OpencodeServer,
    /// The default server: not there is not a failure.
    optional: bool,
    /// Found through `/proc`, not configured: read only once its health says opencode.
    found: bool,
    /// Message reads in flight at once (`opencode.max_parallel`).
    parallel: usize,
}

impl ServerSource {
    /// The server at `url`, with the configured credentials and timeouts.
    pub fn new(config: &Config, url: &ServerUrl, env: Env<'_>) -> Self {
        let mut spec = ServerSpec::new(&url.url);
        spec.username = config.opencode.username.clone();
        spec.password = env(&config.opencode.password_env);
        let mut timeouts = Timeouts {
            connect: config::duration(config.opencode.connect_timeout_s),
            request: config::duration(config.opencode.request_timeout_s),
        };
        if url.optional {
            timeouts.connect = timeouts.connect.min(OPTIONAL_CONNECT_TIMEOUT);
        }
        Self {
            server: OpencodeServer::new(spec, timeouts),
            optional: url.optional,
            found: url.found_in.is_some(),
            parallel: usize::try_from(config.opencode.max_parallel).unwrap_or(1),
        }
    }

    /// The server itself (its event stream, for the follower).
    pub fn server(&self) -> &OpencodeServer {
        &self.server
    }
}

/// The short reason a default server is not there (`connection refused`).
fn absent_reason(e: &SourceError) -> Option<String> {
    match e {
        SourceError::Unreachable { message, .. } => {
            Some(if message.to_ascii_lowercase().contains("refused") {
                "connection refused".to_owned()
            } else {
                message.clone()
            })
        }
        SourceError::Timeout { .. } => Some("no answer".to_owned()),
        _ => None,
    }
}

impl Source for ServerSource {
    fn name(&self) -> &str {
        self.server.shown_url()
    }

    fn read(&self, ctx: &ReadContext<'_>) -> Answer {
        // Everything that leaves the process (journal, store, JSON) names the server redacted.
        let name = self.name().to_owned();
        if self.found
            && let Err(e) = self.server.health()
        {
            return Answer::Absent(name, format!("found listening, but not opencode: {e}"));
        }
        // The deadline bounds this server alone: sources are read one after another, so a
        // server that hangs costs the tick its own deadline, never more.
        let server = self
            .server
            .clone()
            .with_deadline(Instant::now() + ctx.deadline);
        let options = read::ReadOptions {
            full_read: ctx.full_read,
            stale_cutoff_ms: ctx.cutoff_ms,
            focus: ctx.focus,
            parallel: self.parallel,
        };
        match read::read_server(&server, ctx.store, ctx.detector, options) {
            Ok(read) => {
                let mut problems: Vec<String> =
                    read.problems.iter().map(ToString::to_string).collect();
                if read.deadline_skipped > 0 {
                    problems.push(format!(
                        "{name}: {} not read within the source deadline ({:?}): kept for the next tick",
                        count(read.deadline_skipped, "session"),
                        ctx.deadline
                    ));
                }
                Answer::Read(SourceRead {
                    line: format!("{name} {}", count(read.sessions.len(), "session")),
                    sessions: read.sessions,
                    problems,
                    keep_rows: read.stale.clone(),
                    stale: read.stale,
                    cached: true,
                    recorded: false,
                    deadline_skipped: read.deadline_skipped,
                })
            }
            Err(e) => match absent_reason(&e).filter(|_| self.optional) {
                Some(why) => Answer::Absent(name, why),
                None => Answer::Failed(name, e.to_string()),
            },
        }
    }

    fn wake_on(&self) -> super::WakeOn {
        super::WakeOn::Stream(Box::new(self.server.clone()))
    }

    fn can_abort(&self) -> bool {
        true
    }

    fn abort(&self, session: &str) -> Result<(), String> {
        self.server.abort(session).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests;
