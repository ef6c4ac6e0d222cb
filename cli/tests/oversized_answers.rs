//! Oversized answers from an opencode server (issue 50): a session listing or a page of
//! messages of about 10 MB, shaped so that what it says costs far more built than written
//! (870,000 copies of one session; 50,000 sessions; a page of calls whose inputs are long lists
//! of small numbers; a page of the most calls a page may hold). agentwatch reads an answer as
//! it streams, with a bound on its entries, so `agentwatch opencode --once` holds less than ten
//! times the answer at its peak, whatever the shape; then garbage ends the answer, and the
//! server is reported as failing, with the place of the garbage.
//!
//! The peak is read from `/proc/PID/status` (`VmHWM`) while the server holds the answer open
//! after writing it: once nothing waits in either side of the connection and every thread of
//! the process sleeps (it waits for the rest), everything written has been read.

use agentwatch_testkit::TempDir;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

/// How long the test waits for the process before it fails (a hung process, not a slow one).
const PATIENCE: Duration = Duration::from_secs(120);
/// About how long each hostile answer is before its garbage.
const BODY: usize = 10 * 1024 * 1024;
const SESSION: &str = "ses_hostile00000000000001";
const NOW: i64 = 1_796_300_000;
/// [`NOW`] in milliseconds: the session was updated now (not stale: it is read).
const NOW_MS: i64 = NOW * 1000;

/// Which answer is hostile, and its text before the garbage.
#[derive(Clone)]
struct Shape {
    name: &'static str,
    listing: bool,
    body: Vec<u8>,
}

/// `[` then `entry(i)` joined by commas until the text is about [`BODY`] long.
fn list_of(entry: impl Fn(usize) -> String) -> Vec<u8> {
    let mut body = b"[".to_vec();
    let mut i = 0;
    while body.len() < BODY {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(entry(i).as_bytes());
        i += 1;
    }
    body
}

fn shapes() -> Vec<Shape> {
    // A tool call whose input is a list of about 50 KB of ones.
    let ones = format!("[{}1]", "1,".repeat(25_000));
    let heavy = format!(
        r#"{{"type":"tool","tool":"bash","state":{{"status":"completed","input":{{"a":{ones}}}}}}}"#
    );
    let light = r#"{"type":"tool","tool":"read","state":{"status":"completed","input":{"k":1}}}"#;
    let message = |parts: &str| {
        format!(
            r#"{{"info":{{"id":"msg_1","role":"assistant","time":{{"created":1,"completed":2}}}},"parts":[{parts}]}}"#
        )
    };
    // The most calls a page may hold, 100 to a message, then messages of text parts.
    let calls = vec![light; 100].join(",");
    let texts = vec![r#"{"type":"text","text":"x"}"#; 1000].join(",");
    vec![
        Shape {
            name: "870,000 copies of one session",
            listing: true,
            body: list_of(|_| r#"{"id": "a"}"#.to_owned()),
        },
        Shape {
            name: "50,000 sessions, then copies of one",
            listing: true,
            body: list_of(|i| {
                if i < agentwatch_opencode::listing::MAX_LISTED_SESSIONS {
                    format!(r#"{{"id":"ses_{i:08}","title":"t","time":{{"updated":{NOW_MS}}}}}"#)
                } else {
                    r#"{"id":"ses_00000000"}"#.to_owned()
                }
            }),
        },
        Shape {
            name: "calls whose inputs are 50 KB lists of ones",
            listing: false,
            body: list_of(|_| message(&heavy)),
        },
        Shape {
            name: "the most calls a page holds, then text parts",
            listing: false,
            body: list_of(|i| {
                if i < agentwatch_opencode::lite::MAX_PAGE_CALLS / 100 {
                    message(&calls)
                } else {
                    message(&texts)
                }
            }),
        },
    ]
}

/// A loopback server answering as opencode does, but the hostile answer: its text, then held
/// open (`written` says when it was all written) until `go`, then garbage and the end.
struct Hostile {
    port: u16,
    written: Receiver<()>,
    go: Sender<()>,
}

impl Hostile {
    fn start(shape: Shape) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (written_tx, written) = channel();
        let (go, go_rx) = channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                if !answer(conn, &shape, &written_tx, &go_rx) {
                    return;
                }
            }
        });
        Self { port, written, go }
    }
}

/// Answer one request; false once the hostile answer was sent (the server is done).
fn answer(mut conn: TcpStream, shape: &Shape, written: &Sender<()>, go: &Receiver<()>) -> bool {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap_or(0);
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
    }
    let listing = path.starts_with("/experimental/session") || path.starts_with("/session?");
    let messages = path.starts_with(&format!("/session/{SESSION}/message"));
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
    let _ = conn.write_all(head.as_bytes());
    if (listing && shape.listing) || (messages && !shape.listing) {
        let _ = conn.write_all(&shape.body);
        let _ = conn.flush();
        let _ = written.send(());
        let _ = go.recv();
        let _ = conn.write_all(b", garbage");
        return false;
    }
    let body = if listing {
        format!(r#"[{{"id":"{SESSION}","title":"hostile","time":{{"updated":{NOW_MS}}}}}]"#)
    } else if path == "/global/health" {
        r#"{"healthy":true,"version":"1.18.33"}"#.to_owned()
    } else {
        "[]".to_owned()
    };
    let _ = conn.write_all(body.as_bytes());
    true
}

/// The `tx_queue` and `rx_queue` of every connection to or from `port` (`/proc/net/tcp`),
/// summed: zero when nothing written waits to be read.
fn queued(port: u16) -> u64 {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ours = fields.get(1)?.ends_with(&port) || fields.get(2)?.ends_with(&port);
            let listening = fields.get(3) == Some(&"0A");
            let (tx, rx) = fields.get(4)?.split_once(':')?;
            let sum = u64::from_str_radix(tx, 16).ok()? + u64::from_str_radix(rx, 16).ok()?;
            (ours && !listening).then_some(sum)
        })
        .sum()
}

/// Whether every thread of `pid` sleeps.
fn asleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).all(|task| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        state.is_some_and(|s| s.starts_with('S'))
    })
}

/// `VmHWM` of `pid`, in bytes.
fn peak(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn tick(home: &std::path::Path, port: u16) -> Child {
    agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), home)
        .args(["watch", "--once", "--now", &NOW.to_string(), "--server"])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--db")
        .arg(home.join("aw.db"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One shape: the process's peak while the answer is held, and its journal.
fn peak_on(shape: &Shape, home: &std::path::Path) -> (u64, String) {
    let server = Hostile::start(shape.clone());
    let mut child = tick(home, server.port);
    let started = Instant::now();
    server
        .written
        .recv_timeout(PATIENCE)
        .expect("the answer was written");
    let pid = child.id();
    while queued(server.port) > 0 || !asleep(pid) {
        assert!(
            started.elapsed() < PATIENCE,
            "{}: the process never read it all",
            shape.name
        );
        std::thread::yield_now();
    }
    let held = peak(pid);
    server.go.send(()).unwrap();
    let mut journal = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut journal)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{}: {status:?}: {journal}", shape.name);
    (held, journal)
}

#[test]
fn an_oversized_answer_costs_less_than_ten_times_itself_whatever_its_shape() {
    let tmp = TempDir::new("aw-oversized");
    for shape in shapes() {
        let held = peak_on(&shape, &tmp.path);
        let (peak, journal) = held;
        let body = shape.body.len() as u64;
        eprintln!(
            "{}: {} bytes, peak resident {} kB ({:.1}x the answer)",
            shape.name,
            body,
            peak / 1024,
            peak as f64 / body as f64
        );
        assert!(
            peak > 0 && peak < 10 * body,
            "{}: peak resident {peak} bytes for an answer of {body}: {journal}",
            shape.name
        );
        assert!(
            journal.contains("not JSON") || journal.contains("(the limit)"),
            "{}: the garbage or the bound is not reported: {journal}",
            shape.name
        );
    }
}
