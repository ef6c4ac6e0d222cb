//! Headless Chromium driven over the DevTools protocol: open a page, click, read the DOM. A
//! page never acts on its own, so a test that needs a click makes it here, as a user would.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The flags of every headless run here: no sandbox (root in CI), no GPU, nothing fetched.
pub const HEADLESS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

/// A browser with one page, closed when dropped.
pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Start Chromium with its profile in `profile` and attach to a blank page.
    pub fn launch(profile: &Path) -> Self {
        let mut child = Command::new(CHROMIUM)
            .args(HEADLESS)
            .args(["--remote-debugging-port=0", "--remote-allow-origins=*"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        // Chromium says where its DevTools endpoint listens on standard error; the rest of
        // standard error is drained so the browser never blocks on it.
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("chromium's DevTools endpoint");
        let (ws, _) = tungstenite::connect(url.as_str()).expect("DevTools connection");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        }
        let mut browser = Self {
            child,
            ws,
            session: String::new(),
            next_id: 0,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}), false);
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
            false,
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser
    }

    /// One DevTools command (to the page's session when `on_page`): its result.
    fn call(&mut self, method: &str, params: Value, on_page: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if on_page {
            message["sessionId"] = Value::from(self.session.clone());
        }
        self.ws
            .send(Message::text(message.to_string()))
            .expect("send to DevTools");
        loop {
            let Message::Text(text) = self.ws.read().expect("DevTools answers") else {
                continue;
            };
            let answer: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
            if answer["id"] == id {
                if let Some(error) = answer.get("error") {
                    return json!({"exceptionDetails": {"text": error.to_string()}});
                }
                return answer["result"].clone();
            }
        }
    }

    /// Evaluate `expression` in the page, awaiting a promise: its value, or `Err` with the
    /// exception's text.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            true,
        );
        match result.get("exceptionDetails") {
            Some(e) => Err(e.to_string()),
            None => Ok(result["result"]["value"].clone()),
        }
    }

    /// Wait (in the page, at most 20 s) until the JavaScript `condition` holds. A navigation
    /// in between destroys the context the wait runs in; it is asked again in the new one.
    pub fn wait_for(&mut self, condition: &str) {
        let expression = format!(
            "new Promise((ok, no) => {{ const t0 = Date.now(); const f = () => {{ let v = false; \
             try {{ v = ({condition}); }} catch (e) {{}} if (v) return ok(true); \
             if (Date.now() - t0 > 20000) return no(new Error('timed out')); setTimeout(f, 20); }}; f(); }})"
        );
        let mut last = String::new();
        for _ in 0..20 {
            match self.eval(&expression) {
                Ok(_) => return,
                Err(e) if e.contains("timed out") => panic!("{condition}: {e}\n{}", self.dom()),
                Err(e) => last = e,
            }
        }
        panic!("{condition}: {last}");
    }

    /// Open `url` and wait for its scripts to finish (`body[data-ready]`).
    pub fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}), true);
        self.wait_for(&format!(
            "location.href === {} && document.body && document.body.dataset.ready === '1'",
            Value::from(url)
        ));
    }

    /// Click the element `selector` names.
    pub fn click(&mut self, selector: &str) {
        let clicked = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; e.click(); return true; }})()",
                Value::from(selector)
            ))
            .unwrap_or_else(|e| panic!("click {selector}: {e}"));
        assert_eq!(clicked, Value::Bool(true), "nothing matches {selector}");
    }

    /// The page's DOM as HTML.
    pub fn dom(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}
