//! `agentwatch --version` names the commit it was built from: `0.1.0 (1a2b3c4d5e6f)`, with
//! `-dirty` when the tree had changes. Without git (a source tarball, no git on PATH) it is the
//! package version alone.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let version = env!("CARGO_PKG_VERSION");
    let long = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            // Rebuild when HEAD moves: its file, the branch it names, packed refs, the index.
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                println!("cargo:rerun-if-changed={dir}/HEAD");
                println!("cargo:rerun-if-changed={dir}/index");
            }
            if let (Some(common), Some(branch)) = (
                git(&["rev-parse", "--git-common-dir"]),
                git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
            ) {
                let common = Path::new(env!("CARGO_MANIFEST_DIR")).join(common);
                println!("cargo:rerun-if-changed={}", common.join(&branch).display());
                println!(
                    "cargo:rerun-if-changed={}",
                    common.join("packed-refs").display()
                );
            }
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            format!("{version} ({commit}{})", if dirty { "-dirty" } else { "" })
        }
        None => version.to_owned(),
    };
    println!("cargo:rustc-env=AGENTWATCH_LONG_VERSION={long}");
}
