//! Every test `docs/design-coverage.md` cites in its "shown by" column exists (issue 50): a
//! table that names a test nobody can run says "works" about nothing.
//!
//! The table's citations: `crate/file::name` (an integration test, `CRATE_DIR/tests/file.rs`,
//! or a unit test in `CRATE_DIR/src/file.rs`), `crate module::tests::name` (a unit test in
//! that module), `file::name` (a file of the crate cited before it in the cell), and bare names
//! after them in the same cell (the same file). A name ending in
//! `…` or `*` stands for every test it begins. The crate is its package name or its directory
//! (`cli/…` is the `agentwatch` binary's tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate of the repository: its package name and its directory name, both to its
/// directory.
fn crates() -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![repo()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && !name.starts_with('.') && name != "target" {
                dirs.push(path);
            } else if name == "Cargo.toml" {
                let text = std::fs::read_to_string(&path).unwrap();
                let package = text
                    .lines()
                    .find_map(|l| l.strip_prefix("name = \""))
                    .map(|n| n.trim_end_matches('"').to_owned());
                if let Some(package) = package {
                    found.insert(package, dir.clone());
                    let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
                    found.entry(dir_name).or_insert_with(|| dir.clone());
                }
            }
        }
    }
    found
}

/// Where a cited test lives: the files that may hold it.
#[derive(Debug, Clone)]
struct Place {
    /// The crate's directory.
    dir: PathBuf,
    files: Vec<PathBuf>,
}

/// The place a qualified citation names (`crate/file`, `crate module::tests`, or `file` of
/// the crate cited before it in the cell, `last`), or an error saying what does not resolve.
fn place(
    crates: &BTreeMap<String, PathBuf>,
    qualifier: &str,
    last: Option<&Place>,
) -> Result<Place, String> {
    let test_file = |file: &str| vec![format!("tests/{file}.rs"), format!("src/{file}.rs")];
    let (dir, path) = if let Some((krate, file)) = qualifier.split_once('/') {
        (crates.get(krate).map(PathBuf::as_path), test_file(file))
    } else if let Some((krate, module)) = qualifier.split_once(' ') {
        let module = module.trim_end_matches("::tests").replace("::", "/");
        // A module's tests may sit in its file or in a `tests.rs` of its own.
        let files = vec![
            format!("src/{module}.rs"),
            format!("src/{module}/mod.rs"),
            format!("src/{module}/tests.rs"),
        ];
        (crates.get(krate).map(PathBuf::as_path), files)
    } else {
        (last.map(|p| p.dir.as_path()), test_file(qualifier))
    };
    let dir = dir.ok_or_else(|| format!("no crate for `{qualifier}`"))?;
    let files: Vec<PathBuf> = path
        .iter()
        .map(|p| dir.join(p))
        .filter(|p| p.is_file())
        .collect();
    if files.is_empty() {
        return Err(format!("no file {path:?} in {}", dir.display()));
    }
    Ok(Place {
        dir: dir.to_path_buf(),
        files,
    })
}

/// Whether a test `name` (a prefix when it ends in `…` or `*`) is a function of `place`.
fn defined(place: &Place, name: &str) -> bool {
    let (stem, prefix) = match name.strip_suffix('…').or_else(|| name.strip_suffix('*')) {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    place.files.iter().any(|file| {
        let text = std::fs::read_to_string(file).unwrap();
        text.match_indices(&format!("fn {stem}"))
            .any(|(at, m)| prefix || text[at + m.len()..].starts_with(['(', '<']))
    })
}

/// A snake_case name with at least two underscores: a test's name, not a key or a value (nor
/// a backtest row, `ses_…`, a session of the corpus).
fn test_like(name: &str) -> bool {
    let stem = name.trim_end_matches(['…', '*']);
    !stem.starts_with("ses_")
        && stem.matches('_').count() >= 2
        && stem
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What a "shown by" cell cites that does not exist.
fn unresolved(crates: &BTreeMap<String, PathBuf>, cell: &str) -> (usize, Vec<String>) {
    let (mut cited, mut problems) = (0, Vec::new());
    let mut current: Option<Place> = None;
    for span in cell.split('`').skip(1).step_by(2) {
        let (qualifier, name) = match span.rsplit_once("::") {
            Some((q, n)) if !q.contains("::") || q.ends_with("::tests") => (Some(q), n),
            _ => (None, span),
        };
        if let Some(qualifier) = qualifier {
            match place(crates, qualifier, current.as_ref()) {
                Ok(p) => current = Some(p),
                Err(e) => {
                    problems.push(format!("`{span}`: {e}"));
                    current = None;
                    continue;
                }
            }
        } else if !test_like(name) {
            continue;
        }
        let Some(place) = &current else {
            problems.push(format!(
                "`{span}`: a bare name with no file cited before it"
            ));
            continue;
        };
        cited += 1;
        if !defined(place, name) {
            problems.push(format!("`{span}`: no test `{name}` in {:?}", place.files));
        }
    }
    (cited, problems)
}

#[test]
fn every_test_the_design_coverage_table_cites_exists() {
    let crates = crates();
    let text = std::fs::read_to_string(repo().join("docs/design-coverage.md")).unwrap();
    let (mut cited, mut problems) = (0, Vec::new());
    for row in text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #"))
    {
        let shown_by = row.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        let (n, p) = unresolved(&crates, shown_by);
        cited += n;
        let number = row.split('|').nth(1).unwrap_or("").trim();
        problems.extend(p.into_iter().map(|p| format!("row {number}: {p}")));
    }
    assert!(
        cited > 100,
        "only {cited} tests cited: the table was not read"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_test_that_does_not_exist_is_caught() {
    let crates = crates();
    let rows = [
        ("`cli/deck::no_such_test_here`", 1),
        (
            "`agentwatch-web/api::seed_endpoints_answer_from_the_store`, `no_such_test_either`",
            1,
        ),
        ("`cli/no_such_file::a_test_name_here`", 1),
        (
            "`runtime jobs::deck::tests::hook_files_change_the_fingerprint`",
            0,
        ),
        (
            "`cli/deck::critical_session_erroring_four_times_in_300s_…`",
            0,
        ),
        ("`detect-core/rules::top_merges_*`", 0),
    ];
    for (cell, problems) in rows {
        assert_eq!(unresolved(&crates, cell).1.len(), problems, "{cell}");
    }
}
