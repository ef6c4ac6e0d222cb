//! Issue 39: a full disk during a resolving tick loses no resolve. The store lives on a small
//! tmpfs; before the resolving tick the tmpfs is filled (a filler file written until ENOSPC)
//! and then given back `k` pages, for `k = 0, 1, 2, …` until the tick fits: so every write the
//! tick makes, in the order it makes them (WAL frames, the shared-memory index, the checkpoint
//! into the database file), is in turn the first to find the disk full. Each round starts
//! from the same store (a snapshot taken after the trigger was delivered), and after the
//! filler is removed one more tick runs. What must hold in every round:
//!
//! - the failing tick exits 0 or 74 (never a crash), and the store it leaves passes SQLite's
//!   integrity check;
//! - the alert is closed only together with its resolve in the outbox: the alerts table, the
//!   alert state and the outbox agree after the failing tick;
//! - once space returns, the resolve reaches the webhook exactly once (one body, its
//!   `event_id` the one every round's resolve has), and nothing stays pending.
//!
//! Two more ways (issue 50): a tmpfs so small that the resolving tick cannot write at all,
//! swept page by page from a store that barely holds the trigger (`agentwatch alerts` must say
//! what the store says, and the resolve goes out once the tmpfs grows again); and the disk
//! filled by the receiver itself while it takes an event, so the send went out and its record
//! finds the disk full, swept page by page for the trigger and for the resolve.
//!
//! A real file system full, not a mock: SQLite sees ENOSPC from the kernel as it would on a
//! full disk. Mounting needs root (CI runs as root with `--include-ignored`); a failed mount
//! fails the test.

mod common;

use agentwatch_opencode::db::testing::{create_db, insert_export};
use agentwatch_store::Store;
use agentwatch_testkit::opencode::{ExportBuilder, looping_calls};
use agentwatch_testkit::{HttpServer, Reply, Request, TempDir};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const T0: i64 = 1_796_200_000;
const ROOT: &str = "ses_fulldisk0000000001rootAA";
const PAGE: u64 = 4096;
/// Rounds past this many free pages mean the sweep never reached a tick that fits.
const MAX_PAGES: u64 = 2000;

/// A tmpfs mounted on a directory for the test's life, unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "mount -t tmpfs on {} failed ({status:?}): this test needs root",
            dir.display()
        );
        Self {
            dir: dir.to_path_buf(),
        }
    }
}

impl Tmpfs {
    /// Grow or shrink the mounted tmpfs (never below what its files use).
    fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "remount of {} to {size} failed ({status:?})",
            self.dir.display()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Fill the file system holding `path` with the file `path` until ENOSPC, then give back
/// `pages` pages.
fn fill_leaving(path: &Path, pages: u64) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, PAGE as usize] {
        let zeros = vec![0u8; chunk];
        while file.write_all(&zeros).is_ok() {}
    }
    file.sync_all().ok();
    let len = file.metadata().unwrap().len();
    // Whole pages: a short last write leaves part of one.
    let full = len.div_ceil(PAGE) * PAGE;
    file.set_len(full.saturating_sub(pages * PAGE)).unwrap();
}

/// What the receiver does when it takes an event of this state: fill the disk but this many
/// pages (once), so the send went out and its record finds the disk full.
type Armed = Arc<Mutex<Option<(&'static str, u64)>>>;

struct World {
    _tmp: TempDir,
    home: PathBuf,
    /// The opencode.db the ticks read.
    oc: PathBuf,
    mnt: PathBuf,
    hook: HttpServer,
    armed: Armed,
}

/// The session looping, or the same session with one more step, a landed edit (fixed).
fn export(fixed: bool) -> Value {
    let looping = ExportBuilder::new(ROOT, "Fix the money rounding", None, T0 * 1000 - 600_000)
        .steps("build", &looping_calls(45), 1000);
    let edit = (
        "edit",
        json!({"filePath": "/tmp/proj/src/money.py", "oldString": "round(", "newString": "quantize("}),
        json!({"diff": "@@ -1 +1 @@\n-round(\n+quantize(\n"}),
        "Edit applied successfully.",
    );
    let builder = if fixed {
        looping.steps("build", &[edit], 1000)
    } else {
        looping
    };
    builder.build()
}

fn opencode_db(path: &Path, fixed: bool) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    create_db(path).unwrap();
    insert_export(path, &export(fixed), "/tmp/proj").unwrap();
}

impl World {
    fn new(tmp: TempDir, mnt: PathBuf) -> Self {
        let armed: Armed = Arc::default();
        let hook = {
            let (armed, filler) = (Arc::clone(&armed), mnt.join("filler"));
            HttpServer::start(move |request: &Request| {
                let state = request.body_json()["state"].clone();
                let mut armed = armed.lock().unwrap();
                if let Some((_, pages)) = armed.filter(|(s, _)| state == *s) {
                    fill_leaving(&filler, pages);
                    *armed = None;
                }
                Reply::json(200, &json!({"ok": true}))
            })
        };
        let home = common::webhook_home(&tmp.path, &hook, "", "rate_limit_s = 0");
        let oc = tmp.path.join("opencode.db");
        Self {
            _tmp: tmp,
            home,
            oc,
            mnt,
            hook,
            armed,
        }
    }

    /// The next event of `state` the receiver takes fills the disk but `pages` pages.
    fn arm(&self, state: &'static str, pages: u64) {
        *self.armed.lock().unwrap() = Some((state, pages));
    }

    /// Whether `agentwatch alerts` shows the alert open (`Some(None)`: it holds no such
    /// alert); `None` when it cannot read the store (exit 74: SQLite cannot make the WAL index
    /// of a store it did not close on a full disk), which is no wrong answer.
    fn shown_open(&self) -> Option<Option<bool>> {
        let out =
            agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &self.home)
                .args(["alerts", "--all", "--json", "--db"])
                .arg(self.db())
                .output()
                .unwrap();
        if out.status.code() == Some(74) {
            return None;
        }
        assert_eq!(out.status.code(), Some(0), "alerts: {}", stderr(&out));
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = format!("opencode-loop:{ROOT}");
        Some(
            shown["alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["dedup_key"] == key.as_str())
                .map(|a| a["resolved_at"].is_null()),
        )
    }

    fn db(&self) -> PathBuf {
        self.mnt.join("aw.db")
    }

    fn tick(&self, now: i64) -> Output {
        agentwatch_testkit::isolated_command(env!("CARGO_BIN_EXE_agentwatch"), &self.home)
            .args(["watch", "--once", "--now", &now.to_string(), "--db"])
            .arg(self.db())
            .arg("--set")
            .arg(format!("opencode.db={:?}", self.oc.display().to_string()))
            .output()
            .unwrap()
    }

    /// The store as the snapshot holds it, nothing else on the tmpfs.
    fn restore(&self, snapshot: &Path) {
        for entry in std::fs::read_dir(&self.mnt).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        std::fs::copy(snapshot, self.db()).unwrap();
    }

    /// The bodies the receiver got from index `from` on.
    fn bodies(&self, from: usize) -> Vec<Value> {
        self.hook.requests()[from..]
            .iter()
            .map(Request::body_json)
            .collect()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What the store says of the alert after a tick: closed in the alerts table, closed in the
/// alert state, and the resolve rows in the outbox (pending or delivered). `None` when the
/// store holds no alert.
#[derive(Debug)]
struct Stored {
    table_closed: bool,
    state_closed: bool,
    resolves: usize,
    /// Triggers and escalates of the alert a channel took.
    delivered_alarms: usize,
    pending: usize,
}

fn stored(db: &Path) -> Option<Stored> {
    let store = Store::open_read_only(db).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let key = format!("opencode-loop:{ROOT}");
    let alerts = store.alerts(true).unwrap();
    let row = alerts.iter().find(|a| a.dedup_key == key)?;
    let state = store.load_state("alerts").unwrap().unwrap_or_default();
    let state: Value = serde_json::from_str(&state).unwrap_or(Value::Null);
    let outbox = store.outbox().unwrap();
    Some(Stored {
        table_closed: row.resolved_at.is_some(),
        state_closed: state["open_alerts"].get(&key).is_none(),
        resolves: outbox
            .iter()
            .filter(|r| r.event.dedup_key == key && r.event.kind == "resolve")
            .count(),
        delivered_alarms: outbox
            .iter()
            .filter(|r| r.event.dedup_key == key && r.event.kind != "resolve")
            .filter(|r| r.delivered_at.is_some())
            .count(),
        pending: outbox.iter().filter(|r| r.delivered_at.is_none()).count(),
    })
}

/// An alert a channel took is closed only together with its resolve in the outbox, and the
/// alerts table says what the state says. Read from a copy of the store's files, as the disk may still be
/// too full to open it where it is.
fn check_agrees(db: &Path, what: &str) -> Option<Stored> {
    let copy = db.parent().unwrap().with_file_name("check");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    for suffix in ["", "-wal"] {
        let from = PathBuf::from(format!("{}{suffix}", db.display()));
        if from.exists() {
            std::fs::copy(&from, copy.join(format!("aw.db{suffix}"))).unwrap();
        }
    }
    let after = stored(&copy.join("aw.db"))?;
    assert_eq!(
        after.table_closed, after.state_closed,
        "{what}: the alerts table and the state disagree {after:?}"
    );
    assert!(
        !after.state_closed || after.delivered_alarms == 0 || after.resolves == 1,
        "{what}: the alert closed without its resolve in the outbox {after:?}"
    );
    Some(after)
}

/// One round: the resolving tick with `pages` pages free, then one with space back. Returns
/// the first tick's exit code, the resolve's event id and how often it was sent again.
fn round(world: &World, snapshot: &Path, pages: u64) -> (i32, String, usize) {
    world.restore(snapshot);
    let filler = world.mnt.join("filler");
    fill_leaving(&filler, pages);
    let from = world.hook.requests().len();
    let first = world.tick(T0 + 120);
    std::fs::remove_file(&filler).unwrap();
    let code = first.status.code();
    assert!(
        matches!(code, Some(0 | 74)),
        "{pages} pages free: the tick exited {code:?}: {}",
        stderr(&first)
    );
    check_agrees(
        &world.db(),
        &format!("{pages} pages free: {}", stderr(&first)),
    );
    let second = world.tick(T0 + 180);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let done = stored(&world.db()).expect("the alert");
    assert!(
        done.state_closed && done.table_closed && done.pending == 0,
        "{pages} pages free: after space returned {done:?}: {}\n{}",
        stderr(&first),
        stderr(&second)
    );
    // One event: the resolve, sent again only when its send was not recorded, with its id.
    let bodies = world.bodies(from);
    let mut ids: Vec<&str> = bodies
        .iter()
        .filter(|b| b["state"] == "resolve")
        .filter_map(|b| b["event_id"].as_str())
        .collect();
    let sent = ids.len();
    ids.dedup();
    assert!(
        ids.len() == 1 && sent == bodies.len(),
        "{pages} pages free: the receiver got {bodies:?}\nfirst tick: {}\nsecond tick: {}",
        stderr(&first),
        stderr(&second)
    );
    (code.unwrap_or(-1), ids[0].to_owned(), sent - 1)
}

#[test]
#[ignore = "needs root to mount a tmpfs"]
fn a_full_disk_at_any_write_of_a_resolving_tick_loses_no_resolve() {
    let tmp = TempDir::new("aw-full-disk");
    let tmpfs = Tmpfs::mount(&tmp.path.join("mnt"), "4m");
    let world = World::new(tmp, tmpfs.dir.clone());
    opencode_db(&world.oc, false);

    // The loop is alerted with room to spare; that store is every round's start.
    let out = world.tick(T0);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trigger = world.bodies(0);
    assert_eq!(trigger.len(), 1, "{trigger:?}");
    assert_eq!(trigger[0]["state"], "trigger");
    let snapshot = world.mnt.parent().unwrap().join("snapshot.db");
    assert!(!world.mnt.join("aw.db-wal").exists());
    std::fs::copy(world.db(), &snapshot).unwrap();

    // The session is fixed: the next tick resolves.
    opencode_db(&world.oc, true);
    let mut ids = Vec::new();
    let mut failed = 0;
    let mut resent = 0;
    let mut pages = 0;
    loop {
        let (code, id, again) = round(&world, &snapshot, pages);
        ids.push(id);
        resent += again;
        failed += usize::from(code == 74);
        if code == 0 && failed > 0 {
            break;
        }
        pages += 1;
        assert!(pages < MAX_PAGES, "no tick fit in {MAX_PAGES} pages");
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "every round's resolve is one event: {ids:?}");
    eprintln!(
        "{} rounds (0 to {pages} pages free), {failed} ticks failed on a full disk; every \
         round's resolve reached the webhook as one event, {}, sent again {resent} times \
         (sent, then its record failed)",
        pages + 1,
        ids[0]
    );
}

/// Ticks of one round with the filler in place: `(opencode.db fixed?, now)`.
const FULL_TICKS: [(bool, i64); 2] = [(false, T0), (true, T0 + 120)];

/// One round of the longer outage: the disk is full (but `pages` pages) from the tick that
/// triggers through the one that resolves, then space returns and two more ticks run. Returns
/// the exit codes of the ticks on the full disk.
fn outage_round(world: &World, snapshot: &Path, pages: u64) -> Vec<i32> {
    world.restore(snapshot);
    let filler = world.mnt.join("filler");
    fill_leaving(&filler, pages);
    let from = world.hook.requests().len();
    let mut codes = Vec::new();
    let mut journal = String::new();
    for (fixed, now) in FULL_TICKS {
        opencode_db(&world.oc, fixed);
        let out = world.tick(now);
        journal.push_str(&stderr(&out));
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 74)),
            "{pages} pages free: the tick at {now} exited {code:?}: {journal}"
        );
        check_agrees(&world.db(), &format!("{pages} pages free: {journal}"));
        codes.push(code.unwrap_or(-1));
    }
    std::fs::remove_file(&filler).unwrap();
    for now in [T0 + 180, T0 + 240] {
        let out = world.tick(now);
        journal.push_str(&stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{journal}");
    }
    if let Some(done) = stored(&world.db()) {
        assert!(
            done.state_closed && done.table_closed && done.pending == 0,
            "{pages} pages free: after space returned {done:?}: {journal}"
        );
    }
    heard_the_end(
        &world.bodies(from),
        &format!("{pages} pages free: {journal}"),
    );
    codes
}

/// Whatever the receiver heard of, it heard the end of: one alert (one opened_at), a trigger it
/// got is followed by that alert's resolve, and every resolve it got is one event (one id).
fn heard_the_end(bodies: &[Value], what: &str) {
    let field = |state: &str, of: fn(&Value) -> Value| -> Vec<Value> {
        let mut at: Vec<Value> = bodies
            .iter()
            .filter(|b| b["state"] == state)
            .map(of)
            .collect();
        at.dedup();
        at
    };
    let opened_at = |b: &Value| b["details"]["opened_at"].clone();
    let (triggers, resolves) = (field("trigger", opened_at), field("resolve", opened_at));
    assert!(
        triggers.len() <= 1 && triggers == resolves,
        "{what}: triggers opened at {triggers:?}, resolves of {resolves:?}: {bodies:?}"
    );
    assert!(
        bodies.last().is_none_or(|b| b["state"] == "resolve"),
        "{what}: {bodies:?}"
    );
    let ids = field("resolve", |b| b["event_id"].clone());
    assert!(
        ids.len() <= 1,
        "{what}: the resolve as several events {ids:?}"
    );
}

#[test]
#[ignore = "needs root to mount a tmpfs"]
fn a_disk_full_from_the_trigger_through_the_resolve_loses_no_resolve() {
    let tmp = TempDir::new("aw-full-outage");
    let tmpfs = Tmpfs::mount(&tmp.path.join("mnt"), "4m");
    let world = World::new(tmp, tmpfs.dir.clone());

    // A store that has seen an empty opencode.db is every round's start.
    create_db(&world.oc).unwrap();
    let out = world.tick(T0 - 60);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let snapshot = world.mnt.parent().unwrap().join("snapshot.db");
    std::fs::copy(world.db(), &snapshot).unwrap();

    let mut failed = 0;
    let mut pages = 0;
    loop {
        let codes = outage_round(&world, &snapshot, pages);
        failed += codes.iter().filter(|c| **c == 74).count();
        if codes.iter().all(|c| *c == 0) {
            break;
        }
        pages += 1;
        assert!(pages < MAX_PAGES, "no tick fit in {MAX_PAGES} pages");
    }
    assert!(failed > 0, "no tick failed: the disk was never full");
    eprintln!(
        "{} rounds (0 to {pages} pages free), {failed} ticks failed on a full disk; the receiver \
         heard every alert it got end",
        pages + 1
    );
}

/// The tmpfs sizes the small-store sweep starts from: the store of an empty tick and one page.
const SMALL_FROM_PAGES: u64 = 1;

/// One round of the small store: the tmpfs is `size` pages (the store an empty tick left, a
/// little room), the loop triggers and is fixed on it, then the tmpfs grows and one more tick
/// runs. Returns the exit codes of the trigger and the resolving tick.
fn small_round(world: &World, tmpfs: &Tmpfs, snapshot: &Path, pages: u64) -> (i32, i32) {
    tmpfs.resize("4m");
    world.restore(snapshot);
    let used = std::fs::metadata(world.db()).unwrap().len().div_ceil(PAGE);
    tmpfs.resize(&format!("{}k", (used + pages) * PAGE / 1024));
    let from = world.hook.requests().len();
    let mut journal = String::new();
    let mut codes = Vec::new();
    for (fixed, now) in FULL_TICKS {
        opencode_db(&world.oc, fixed);
        let out = world.tick(now);
        journal.push_str(&stderr(&out));
        let code = out.status.code();
        let what = format!("{pages} pages beyond the store, tick at {now}: {journal}");
        assert!(matches!(code, Some(0 | 74)), "{what}: exited {code:?}");
        // What the operator is shown is what the store holds.
        let held = check_agrees(&world.db(), &what);
        if let Some(shown) = world.shown_open() {
            assert_eq!(
                shown,
                held.map(|h| !h.table_closed),
                "{what}: `agentwatch alerts` disagrees with the store"
            );
        }
        codes.push(code.unwrap_or(-1));
    }
    tmpfs.resize("4m");
    let out = world.tick(T0 + 180);
    journal.push_str(&stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{journal}");
    if let Some(done) = stored(&world.db()) {
        assert!(
            done.state_closed && done.table_closed && done.pending == 0,
            "{pages} pages beyond the store: after the tmpfs grew {done:?}: {journal}"
        );
    }
    heard_the_end(
        &world.bodies(from),
        &format!("{pages} pages beyond the store: {journal}"),
    );
    (codes[0], codes[1])
}

#[test]
#[ignore = "needs root to mount a tmpfs"]
fn a_store_too_small_for_the_resolving_tick_resolves_once_the_disk_grows() {
    let tmp = TempDir::new("aw-full-small");
    let tmpfs = Tmpfs::mount(&tmp.path.join("mnt"), "4m");
    let world = World::new(tmp, tmpfs.dir.clone());
    create_db(&world.oc).unwrap();
    let out = world.tick(T0 - 60);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let snapshot = world.mnt.parent().unwrap().join("snapshot.db");
    std::fs::copy(world.db(), &snapshot).unwrap();

    let (mut triggered_only, mut pages) = (0, SMALL_FROM_PAGES);
    loop {
        let (trigger, resolve) = small_round(&world, &tmpfs, &snapshot, pages);
        triggered_only += usize::from(trigger == 0 && resolve == 74);
        if trigger == 0 && resolve == 0 {
            break;
        }
        pages += 1;
        assert!(
            pages < MAX_PAGES,
            "no resolving tick fit in {MAX_PAGES} pages"
        );
    }
    assert!(
        triggered_only > 0,
        "no size held the trigger but not the resolve"
    );
    eprintln!(
        "{pages} sizes; at {triggered_only} the trigger fit and the resolving tick could not \
         write; the receiver heard the end of every alert it got"
    );
}

/// One round of a send whose record finds the disk full: from `snapshot`, the receiver fills
/// the disk but `pages` pages when it takes the first event of `state`; the ticks of `ticks`
/// run, the filler goes, two more ticks run. Returns how many ticks failed.
fn receipt_round(
    world: &World,
    (snapshot, heard_before): (&Path, &[Value]),
    (state, pages): (&'static str, u64),
    ticks: &[(bool, i64)],
) -> usize {
    world.restore(snapshot);
    world.arm(state, pages);
    let from = world.hook.requests().len();
    let (mut journal, mut failed) = (String::new(), 0);
    for &(fixed, now) in ticks {
        opencode_db(&world.oc, fixed);
        let out = world.tick(now);
        journal.push_str(&stderr(&out));
        let code = out.status.code();
        let what = format!("{state} filling to {pages} pages, tick at {now}: {journal}");
        assert!(matches!(code, Some(0 | 74)), "{what}: exited {code:?}");
        check_agrees(&world.db(), &what);
        failed += usize::from(code == Some(74));
    }
    *world.armed.lock().unwrap() = None;
    let _ = std::fs::remove_file(world.mnt.join("filler"));
    for now in [T0 + 180, T0 + 240] {
        let out = world.tick(now);
        journal.push_str(&stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{journal}");
    }
    let what = format!("{state} filling to {pages} pages: {journal}");
    let done = stored(&world.db()).expect("the alert");
    assert!(
        done.state_closed && done.table_closed && done.pending == 0,
        "{what}: after space returned {done:?}"
    );
    let bodies = [heard_before, &world.bodies(from)].concat();
    assert!(
        bodies.iter().any(|b| b["state"] == "resolve"),
        "{what}: no resolve {bodies:?}"
    );
    heard_the_end(&bodies, &what);
    failed
}

/// A receipt sweep: the state whose record finds the disk full, the store it starts from,
/// what the receiver heard before, and the ticks it runs.
type ReceiptRound<'a> = (&'static str, &'a Path, &'a [Value], &'a [(bool, i64)]);

#[test]
#[ignore = "needs root to mount a tmpfs"]
fn a_disk_filled_between_a_send_and_its_record_loses_no_resolve() {
    let tmp = TempDir::new("aw-full-receipt");
    let tmpfs = Tmpfs::mount(&tmp.path.join("mnt"), "4m");
    let world = World::new(tmp, tmpfs.dir.clone());
    create_db(&world.oc).unwrap();
    let out = world.tick(T0 - 60);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let empty = world.mnt.parent().unwrap().join("empty.db");
    std::fs::copy(world.db(), &empty).unwrap();
    opencode_db(&world.oc, false);
    let out = world.tick(T0);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The receiver holds this trigger when a round starts from `triggered`.
    let trigger = world.bodies(0);
    assert_eq!(trigger.len(), 1, "{trigger:?}");
    let triggered = world.mnt.parent().unwrap().join("triggered.db");
    assert!(!world.mnt.join("aw.db-wal").exists());
    std::fs::copy(world.db(), &triggered).unwrap();

    // The trigger's record, then the resolving tick, on the full disk; the resolve's record.
    let rounds: [ReceiptRound<'_>; 2] = [
        ("trigger", &empty, &[], &FULL_TICKS),
        ("resolve", &triggered, &trigger, &FULL_TICKS[1..]),
    ];
    for (state, snapshot, heard_before, ticks) in rounds {
        let (mut failed, mut pages) = (0, 0);
        loop {
            let start = (snapshot, heard_before);
            let now_failed = receipt_round(&world, start, (state, pages), ticks);
            failed += now_failed;
            if now_failed == 0 {
                break;
            }
            pages += 1;
            assert!(pages < MAX_PAGES, "no tick fit in {MAX_PAGES} pages");
        }
        assert!(failed > 0, "{state}: no record found the disk full");
        eprintln!("{state}: {pages} rounds, {failed} ticks failed; the receiver heard the end");
    }
}
