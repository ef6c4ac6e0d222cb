//! Routing: each request, its access checked, to the JSON API, the metrics or a page. It sits
//! above the three, which share only the [`App`].

use crate::api::App;
use crate::{Incoming, Reply};
use agentwatch_http::percent_decode;

/// The reply to one request.
pub(crate) fn handle(app: &App, req: &Incoming) -> Reply {
    if let Err(reply) = crate::access::check(&app.options, req) {
        return reply;
    }
    // Pages are served under `/` and under `/admin/` (`watchdog.dashboard_base_url`).
    let path = req.path.as_str();
    let page_path = match path.strip_prefix("/admin") {
        Some(rest) if !rest.starts_with("/api/") => {
            if rest.is_empty() {
                "/"
            } else {
                rest
            }
        }
        _ => path,
    };
    let result = match (req.method.as_str(), page_path) {
        ("GET", "/api/watchdog/loops") => app.loops(),
        ("GET", "/api/watchdog/sessions") => app.sessions(req),
        ("GET", "/api/watchdog/status") => app.status(),
        ("GET", "/api/watchdog/channels") => app.channels().map(|c| Reply::json(200, &c)),
        ("POST", "/api/watchdog/channels") => app.set_channel(req),
        ("POST", "/api/watchdog/test-alert") => app.test_alert(req),
        ("GET", "/api/watchdog/models") => app.models(),
        ("GET", "/api/watchdog/models/blocked") => app.blocked(),
        ("POST", "/api/watchdog/models/block") => app.block(req),
        ("POST", "/api/watchdog/models/unblock") => app.unblock(req),
        ("GET", "/recovery-notice.json") => Ok(app.notice_file()),
        ("GET", "/api/recovery/splash") => Ok(Reply::json(200, &app.splash())),
        ("GET", "/api/deck") => app.deck().map(|v| Reply::json(200, &v)),
        ("GET", "/api/recover") => app.recover().map(|v| Reply::json(200, &v)),
        ("GET", "/admin/api/config") => app.config_values(),
        ("GET", "/metrics") => crate::metrics::render(app, req.header("Accept")),
        ("GET", p) if p.starts_with("/api/watchdog/trees/") => {
            let root = percent_decode(&p["/api/watchdog/trees/".len()..]);
            app.tree(&root, req).map(|v| Reply::json(200, &v))
        }
        ("POST", p) if p.starts_with("/admin/api/config/") => {
            app.set_config(&p["/admin/api/config/".len()..], req)
        }
        ("GET", p) => crate::pages::page(app, p, req),
        (_, p) if p.starts_with("/api/") || p.starts_with("/admin/api/") => Err(Reply::error(
            405,
            None,
            format!("{} {} is not supported", req.method, req.path),
        )),
        _ => Err(Reply::error(405, None, "method not allowed")),
    };
    result.unwrap_or_else(|reply| reply)
}
