//! Requests and connections meant to knock the server over (issue 38), sent by a raw socket
//! client on 127.0.0.1 to the real server: in this process with short limits, and as the
//! `agentwatch serve` process with its defaults, whose peak memory is read from `/proc`.
//!
//! No request pattern here stops the server, costs more than 64 MB, or holds a worker longer
//! than its timeouts; a normal client is answered while the attackers hold their connections.

mod common;

use agentwatch_testkit::TempDir;
use agentwatch_web::{Limits, ServeOptions};
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A normal request, answered on a fresh connection within `within`: its status.
fn normal(addr: SocketAddr, within: Duration) -> u16 {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(within)).unwrap();
    conn.write_all(
        b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer)
        .unwrap_or_else(|e| panic!("no answer within {within:?}: {e}"));
    status_of(&answer)
}

fn status_of(answer: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"))
}

/// Send `head` and read what comes back until the server closes (or `wait` passes).
fn exchange(addr: SocketAddr, head: &[u8], wait: Duration) -> Vec<u8> {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(wait)).unwrap();
    let _ = conn.write_all(head);
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer);
    answer
}

/// Write a request line of 64 MiB (`GET /aaa…`) on `conn` until the server stops taking it:
/// how much it took.
fn send_64_mib_line(conn: &mut TcpStream) -> usize {
    conn.set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let chunk = [b'a'; 64 * 1024];
    let mut sent = conn.write(b"GET /").unwrap();
    while sent < 64 << 20 {
        match conn.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    sent
}

/// A server in this process with `limits`.
fn server_with(dir: &TempDir, limits: Limits) -> agentwatch_web::Running {
    let mut o = options(dir);
    o.limits = limits;
    start(o)
}

/// Short timeouts, so a test sees them end.
fn short() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
        write_stall: Duration::from_secs(1),
        ..Limits::default()
    }
}

/// The requests of the issue: each is refused (4xx) and the server answers the next one.
#[test]
fn the_issues_requests_are_refused_and_the_server_stays() {
    let dir = TempDir::new("aw-attack-issue");
    filled(&dir);
    let server = server_with(&dir, short());
    let addr = server.local_addr();
    let rows: &[(&str, &[u8])] = &[
        (
            "a GET announcing 64 TiB",
            b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 70368744177664\r\n\r\n",
        ),
        (
            "u64::MAX",
            b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
        ),
        (
            "a POST body over the limit",
            b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 65537\r\n\r\n{",
        ),
        (
            "two lengths",
            b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
        ),
        (
            "a header line of 1 MiB",
            &[b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".as_slice(), &[b'a'; 1 << 20], b"\r\n\r\n"].concat(),
        ),
        (
            "500 headers",
            &[
                b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n".as_slice(),
                &b"X-A: b\r\n".repeat(500),
                b"\r\n",
            ]
            .concat(),
        ),
        ("garbage", b"\x00\x01\x02 not http at all\r\n\r\n"),
    ];
    for (name, head) in rows {
        // Four of each: four was enough to end tiny_http's workers.
        for _ in 0..4 {
            let answer = exchange(addr, head, Duration::from_secs(10));
            if !answer.is_empty() {
                let status = status_of(&answer);
                assert!((400..500).contains(&status), "{name}: {status}");
            }
            assert_eq!(normal(addr, Duration::from_secs(5)), 200, "after {name}");
        }
    }
}

/// The headers every answer of the server carries, as `name: value` lines of a head.
const EVERY_ANSWERS_HEADERS: &[&str] = &[
    "content-type: application/json",
    "cache-control: no-store",
    "x-content-type-options: nosniff",
    "x-frame-options: DENY",
    "referrer-policy: no-referrer",
    "content-security-policy: ",
];

/// Issue 50: the answers of the server's own limits (a body too large, a head too large, a
/// request too slow, a head that does not parse) are JSON saying which limit, with the headers
/// of every other answer, not a layer's or hyper's bare text.
#[test]
fn every_limit_answer_is_json_with_every_answers_headers() {
    let dir = TempDir::new("aw-attack-limits");
    filled(&dir);
    let server = server_with(&dir, short());
    let addr = server.local_addr();
    let rows: &[(u16, &str, Vec<u8>)] = &[
        (
            413,
            "a POST body over the limit",
            b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 65537\r\n\r\n{".to_vec(),
        ),
        (
            431,
            "a header line of 1 MiB",
            [b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".as_slice(), &[b'a'; 1 << 20], b"\r\n\r\n"].concat(),
        ),
        (
            431,
            "500 headers",
            [b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n".as_slice(), &b"X-A: b\r\n".repeat(500), b"\r\n"].concat(),
        ),
        (
            408,
            "a body that never comes",
            b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{".to_vec(),
        ),
        (400, "garbage", b"\x00\x01\x02 not http at all\r\n\r\n".to_vec()),
    ];
    for (status, name, request) in rows {
        let answer = exchange(addr, request, Duration::from_secs(10));
        assert_eq!(status_of(&answer), *status, "{name}");
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        let head = head.to_ascii_lowercase();
        for header in EVERY_ANSWERS_HEADERS {
            assert!(
                head.contains(&header.to_ascii_lowercase()),
                "{name}: no `{header}` in {head}"
            );
        }
        let error: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{name}: the body is not JSON ({e}): {body:?}"));
        assert!(
            error["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{name}: {error}"
        );
        assert_eq!(normal(addr, Duration::from_secs(5)), 200, "after {name}");
    }
}

/// A request line of 64 MiB: refused once the head passes its limit; the sender is cut off.
#[test]
fn a_64_mib_request_line_is_cut_off() {
    let dir = TempDir::new("aw-attack-line");
    let server = server_with(&dir, short());
    let addr = server.local_addr();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let sent = send_64_mib_line(&mut conn);
    assert!(
        sent < 64 << 20,
        "the server took all 64 MiB of one request line"
    );
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer);
    if !answer.is_empty() {
        assert!((400..500).contains(&status_of(&answer)));
    }
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
}

/// Slow clients: some send half a head, some announce a body and send part of it, some send
/// nothing at all. While they hold their connections a normal client is answered within a
/// second; then each is closed by its timeout (a 408 for a body that never came).
#[test]
fn slow_clients_hold_only_their_own_connections() {
    let dir = TempDir::new("aw-attack-slow");
    filled(&dir);
    let limits = Limits {
        header_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(3),
        ..Limits::default()
    };
    let server = server_with(&dir, limits);
    let addr = server.local_addr();
    let heads: [&[u8]; 3] = [
        b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.",
        b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":",
        b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
    ];
    let mut slow: Vec<(usize, TcpStream)> = Vec::new();
    for i in 0..60 {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(heads[i % 3]).unwrap();
        slow.push((i % 3, conn));
    }
    let started = Instant::now();
    for _ in 0..5 {
        assert_eq!(normal(addr, Duration::from_secs(1)), 200);
    }
    let normal_took = started.elapsed();
    // Every slow connection was still open while the normal client was answered.
    assert!(normal_took < limits.header_timeout, "{normal_took:?}");
    for (kind, mut conn) in slow {
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer);
        if kind > 0 {
            assert_eq!(status_of(&answer), 408, "a body that never came");
        }
    }
    eprintln!("5 normal requests beside 60 slow clients: {normal_took:?}");
}

/// A client that asks for a large answer and never reads it is dropped once its writes stall.
#[test]
fn a_client_that_never_reads_is_dropped() {
    let dir = TempDir::new("aw-attack-noread");
    filled(&dir);
    let server = server_with(&dir, short());
    let addr = server.local_addr();
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut conn = TcpStream::connect(addr).unwrap();
        for _ in 0..50 {
            let _ = conn.write_all(
                b"GET /api/watchdog/trees/ses_demo_build?limit=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            );
        }
        idle.push(conn);
    }
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
    drop(idle);
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
}

/// One keep-alive exchange: send a GET, read the head and its `Content-Length` body.
fn keep_alive_get(reader: &mut BufReader<TcpStream>, path: &str) -> u16 {
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    reader.get_mut().write_all(request.as_bytes()).unwrap();
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_of(status_line.as_bytes());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    status
}

/// 5,000 requests from 500 connections open at once: every one answered 200.
#[test]
fn five_thousand_requests_from_five_hundred_connections() {
    let dir = TempDir::new("aw-attack-load");
    filled(&dir);
    let server = start(options(&dir));
    let addr = server.local_addr();
    let started = Instant::now();
    let threads: Vec<_> = (0..50)
        .map(|t| {
            std::thread::spawn(move || {
                let mut conns: Vec<BufReader<TcpStream>> = (0..10)
                    .map(|_| {
                        let c = TcpStream::connect(addr).unwrap();
                        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                        BufReader::new(c)
                    })
                    .collect();
                let paths = [
                    "/api/watchdog/status",
                    "/api/watchdog/loops",
                    "/metrics",
                    "/",
                ];
                let mut ok = 0;
                for round in 0..10 {
                    for conn in &mut conns {
                        if keep_alive_get(conn, paths[(t + round) % paths.len()]) == 200 {
                            ok += 1;
                        }
                    }
                }
                ok
            })
        })
        .collect();
    let ok: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(ok, 5_000);
    eprintln!(
        "5,000 requests over 500 connections: {:?}",
        started.elapsed()
    );
}

// ------------------------------------------------------------------------------------------------
// The `agentwatch serve` process with its default limits

/// `VmHWM` (peak resident set) or `VmRSS` of `pid`, in kB.
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// An `agentwatch serve` process, killed when dropped.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agentwatch serve` on a free loopback port, on the store and config of `dir`: the process
/// and where it listens.
fn serve_process(dir: &TempDir) -> (Kill, SocketAddr) {
    let mut child = std::process::Command::new(agentwatch_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path.join("agentwatch.db"))
        .arg("--config")
        .arg(dir.path.join("config.toml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child = Kill(child);
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}

/// The issue's requests against `agentwatch serve` itself: it answers every one, stays up, and
/// its peak memory grows by less than 64 MB.
#[test]
fn agentwatch_serve_survives_the_issues_requests() {
    let dir = TempDir::new("aw-attack-process");
    filled(&dir);
    let (mut child, addr) = serve_process(&dir);
    let pid = child.0.id();
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
    let before = memory_kb(pid, "VmHWM:");

    let huge = b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 70368744177664\r\n\r\n";
    let max = b"GET /api/watchdog/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18446744073709551615\r\n\r\n";
    for head in [huge.as_slice(), max] {
        for _ in 0..4 {
            let answer = exchange(addr, head, Duration::from_secs(30));
            assert!((400..500).contains(&status_of(&answer)));
        }
    }
    // Four bodies announced and never sent, held open while others are served.
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"POST /api/watchdog/channels HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n").unwrap();
            c
        })
        .collect();
    for _ in 0..8 {
        assert_eq!(normal(addr, Duration::from_secs(1)), 200);
    }
    // A 64 MiB request line.
    let mut conn = TcpStream::connect(addr).unwrap();
    send_64_mib_line(&mut conn);
    drop(conn);
    // Big answers asked for and not read, from many connections.
    let unread: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            let _ = c.write_all(
                b"GET /api/watchdog/trees/ses_demo_build?limit=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            );
            c
        })
        .collect();
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
    for mut c in held {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        assert_eq!(status_of(&answer), 408);
    }
    drop(unread);
    assert!(child.0.try_wait().unwrap().is_none(), "serve exited");
    assert_eq!(normal(addr, Duration::from_secs(5)), 200);
    let peak = memory_kb(pid, "VmHWM:");
    eprintln!(
        "agentwatch serve: VmHWM {before} kB before, {peak} kB after, VmRSS {} kB",
        memory_kb(pid, "VmRSS:")
    );
    assert!(
        peak - before < 64 * 1024,
        "peak memory grew by {} kB",
        peak - before
    );
}

/// The defaults keep a worst case under 64 MB: the response budget, the handlers' answers and
/// a head buffer for each open connection.
#[test]
fn the_default_limits_add_up_to_less_than_64_mb() {
    let l = Limits::default();
    // The largest answer: a tree's 10,000 verdict rows (about 4 MB).
    let largest_answer = 5 * 1024 * 1024;
    // Each open connection: its head buffer and as much again for hyper's write buffer.
    let connections = l.max_connections * 2 * l.max_head_bytes;
    let worst = l.response_budget_bytes + l.handlers * largest_answer + connections;
    assert!(worst < 64 * 1024 * 1024, "{worst}");
    assert!(l.request_timeout <= Duration::from_secs(30));
    assert!(l.header_timeout <= Duration::from_secs(30));
    let _ = ServeOptions::new("x.db".into());
}
