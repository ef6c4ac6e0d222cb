//! Finding opencode servers that run on this host when no config names one: the opencode TUI
//! and `opencode serve` without `--port` listen on a random port, so the well-known 4096 is
//! not enough. On Linux, `/proc` tells which processes of this user are opencode and which
//! sockets they listen on; the loopback ones are candidates (the caller checks each with
//! `GET /global/health` before reading it). Elsewhere nothing is found.
//!
//! The tables are parsed by pure functions ([`listening_sockets`]); [`opencode_listeners`]
//! does the reading.

use std::collections::BTreeSet;
use std::path::Path;

/// One loopback port an opencode process of this user listens on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listener {
    /// The process.
    pub pid: u32,
    /// The TCP port.
    pub port: u16,
}

impl Listener {
    /// The server's base URL (`http://127.0.0.1:PORT`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A listening socket of a `/proc/net/tcp` or `tcp6` table that a loopback client reaches:
/// `(inode, port)`.
///
/// Lines that do not parse are skipped: the table is the kernel's, but a reader must not
/// trust any text.
#[must_use]
pub fn listening_sockets(table: &str) -> Vec<(u64, u16)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            // 0A: TCP_LISTEN.
            if *state != "0A" {
                return None;
            }
            let (address, port) = local.split_once(':')?;
            if !reaches_loopback(address) {
                return None;
            }
            let port = u16::from_str_radix(port, 16).ok()?;
            Some((inode.parse().ok()?, port))
        })
        .collect()
}

/// Whether a listening address (hex, as `/proc/net/tcp*` writes it) takes loopback clients:
/// 127.0.0.0/8, ::1, an IPv4-mapped 127.x, or every address (0.0.0.0, ::).
fn reaches_loopback(hex: &str) -> bool {
    match hex.len() {
        // IPv4 in host byte order (little-endian here): the first octet is the last byte.
        8 => hex.ends_with("7F") || hex.chars().all(|c| c == '0'),
        32 => {
            let all_zero = hex.chars().all(|c| c == '0');
            // ::1 is four 32-bit words, each in host order: the last reads 01000000.
            let v6_loopback = hex == "00000000000000000000000001000000";
            // ::ffff:127.x.x.x: the third word FFFF0000, the fourth ends with 7F.
            let mapped = hex[16..24].eq_ignore_ascii_case("FFFF0000") && hex.ends_with("7F");
            all_zero || v6_loopback || mapped
        }
        _ => false,
    }
}

/// Whether a process is opencode: its name (`comm`) or its program's file name says so.
fn is_opencode(proc_dir: &Path) -> bool {
    let comm = std::fs::read_to_string(proc_dir.join("comm")).unwrap_or_default();
    if comm.trim() == "opencode" {
        return true;
    }
    let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let program = String::from_utf8_lossy(argv0);
    Path::new(program.as_ref())
        .file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with("opencode"))
}

/// The socket inodes a process holds open (`/proc/PID/fd/*` -> `socket:[INODE]`).
fn socket_inodes(proc_dir: &Path) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
        return BTreeSet::new();
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Whether a process runs with `home` as its `HOME` (a process that says none counts): the
/// opencode of this account, not another login's or a sandbox's with its own data.
fn runs_in_home(proc_dir: &Path, home: Option<&str>) -> bool {
    let Some(home) = home else {
        return true;
    };
    let environ = std::fs::read(proc_dir.join("environ")).unwrap_or_default();
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(b"HOME="))
        .is_none_or(|theirs| theirs == home.as_bytes())
}

/// The loopback ports the opencode processes of this user (running with `home` as their
/// `HOME`, when given) listen on, under `proc_root` (`/proc`), by process then port. Processes
/// of other users, and everything that cannot be read, are left out.
#[must_use]
pub fn opencode_listeners(proc_root: &Path, home: Option<&str>) -> Vec<Listener> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(me) = std::fs::metadata(proc_root.join("self")).map(|m| m.uid()) else {
            return Vec::new();
        };
        let mut found = BTreeSet::new();
        let Ok(entries) = std::fs::read_dir(proc_root) else {
            return Vec::new();
        };
        for entry in entries.filter_map(Result::ok) {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            let mine = std::fs::metadata(&dir).is_ok_and(|m| m.uid() == me);
            if !mine || !is_opencode(&dir) || !runs_in_home(&dir, home) {
                continue;
            }
            let inodes = socket_inodes(&dir);
            for table in ["net/tcp", "net/tcp6"] {
                let text = std::fs::read_to_string(dir.join(table)).unwrap_or_default();
                for (inode, port) in listening_sockets(&text) {
                    if inodes.contains(&inode) {
                        found.insert(Listener { pid, port });
                    }
                }
            }
        }
        found.into_iter().collect()
    }
    #[cfg(not(unix))]
    {
        let _ = (proc_root, home);
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1000 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1001 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1
   3: 0A00020F:1002 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
   4: garbage
";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2000 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:2001 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 666 1 0000000000000000 100 0 0 10 0
   2: 20010DB8000000000000000000000001:2002 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn only_listening_sockets_a_loopback_client_reaches() {
        // 127.0.0.1:4096 and 0.0.0.0:8080 listen; an established socket and 15.2.0.10 do not
        // count; ::1, ::ffff:127.0.0.1 do, 2001:db8::1 does not.
        assert_eq!(listening_sockets(TCP), [(111, 0x1000), (222, 0x1F90)]);
        assert_eq!(listening_sockets(TCP6), [(555, 0x2000), (666, 0x2001)]);
        assert!(listening_sockets("").is_empty());
    }

    #[test]
    fn a_fake_proc_tree_gives_the_opencode_processes_ports() {
        let root = std::env::temp_dir().join(format!("aw-proc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let pid = root.join("4121");
        std::fs::create_dir_all(pid.join("fd")).unwrap();
        std::fs::create_dir_all(pid.join("net")).unwrap();
        std::os::unix::fs::symlink(&pid, root.join("self")).unwrap();
        std::fs::write(pid.join("comm"), "opencode\n").unwrap();
        std::fs::write(pid.join("net/tcp"), TCP).unwrap();
        std::os::unix::fs::symlink("socket:[111]", pid.join("fd/7")).unwrap();
        std::os::unix::fs::symlink("socket:[333]", pid.join("fd/8")).unwrap();
        let other = root.join("4122");
        std::fs::create_dir_all(other.join("net")).unwrap();
        std::fs::write(other.join("comm"), "python3\n").unwrap();
        std::fs::write(pid.join("environ"), b"PATH=/bin\0HOME=/home/me\0").unwrap();
        let found = opencode_listeners(&root, Some("/home/me"));
        assert_eq!(
            found,
            [Listener {
                pid: 4121,
                port: 0x1000
            }]
        );
        assert_eq!(found[0].url(), "http://127.0.0.1:4096");
        assert!(opencode_listeners(&root, Some("/home/other")).is_empty());
        assert_eq!(opencode_listeners(&root, None), found);
        let _ = std::fs::remove_dir_all(&root);
    }
}
