//! Records the commit the binary is built from, so that `bench compare`
//! can refuse to measure a `paddock` that is not the tree's: a build of
//! another commit into the same target directory leaves its binary there,
//! and cargo, finding this tree's own artifacts fresh, does not put the
//! tree's binary back.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        // Every move of HEAD (a commit, a checkout, a reset) is logged here.
        println!("cargo:rerun-if-changed={git_dir}/logs/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
    }
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=PADDOCK_BUILT_FROM={commit}");
}
