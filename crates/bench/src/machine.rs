//! The machine and the versions behind every figure of a report.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory: String,
    pub kernel: String,
    /// How an idle CPU waits: on a virtual machine, a vCPU that halts
    /// must be woken through the hypervisor, which every hand-off of a
    /// request between threads may pay.
    pub cpu_idle: String,
    /// Whether the host takes back memory the guest frees (see
    /// [`free_page_reporting`]).
    pub free_page_reporting: String,
    /// File system and device of the servers' data directory.
    pub disk: String,
    pub paddock: String,
    pub zookeeper: String,
    pub java: String,
}

/// The commit this binary was built from (see the crate's build script);
/// empty when it was built outside a git checkout.
const BUILT_FROM: &str = env!("PADDOCK_BUILT_FROM");

/// Why this binary must not be measured as the tree's: it was built from
/// another commit than the one checked out. `None` when they agree or
/// either is unknown.
pub fn binary_not_of_tree() -> Option<String> {
    let head = output("git", &["rev-parse", "HEAD"])?;
    if BUILT_FROM.is_empty() || head == BUILT_FROM {
        return None;
    }
    Some(format!(
        "this paddock binary was built from commit {} but the tree is at {}, so what it \
         measures is not the tree's (built before the last commit, or left by a build of \
         another commit into the same target directory). Rebuild it with `cargo clean \
         --release -p bench && cargo build --release --bin paddock`, then run the comparison \
         again",
        short(BUILT_FROM),
        short(&head)
    ))
}

/// A commit as git abbreviates it.
fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

impl Machine {
    pub fn probe(data_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let commit = (!BUILT_FROM.is_empty()).then(|| short(BUILT_FROM));
        Machine {
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
                .unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory: format!("{:.1} GiB", memory_kib / (1 << 20) as f64),
            kernel: output("uname", &["-sr"]).unwrap_or_else(|| "unknown".into()),
            cpu_idle: cpu_idle(),
            free_page_reporting: free_page_reporting(),
            disk: output(
                "df",
                &["--output=source,fstype", &data_dir.display().to_string()],
            )
            .and_then(|out| {
                out.lines()
                    .nth(1)
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            })
            .unwrap_or_else(|| "unknown".into()),
            paddock: match commit {
                Some(commit) => format!(
                    "{} (commit {commit}, release build)",
                    env!("CARGO_PKG_VERSION")
                ),
                None => format!("{} (release build)", env!("CARGO_PKG_VERSION")),
            },
            zookeeper: output("dpkg-query", &["-W", "-f", "${Version}", "zookeeper"])
                .map(|v| format!("{v} (Debian package zookeeper)"))
                .unwrap_or_else(|| "not installed".into()),
            java: Command::new("java")
                .arg("-version")
                .output()
                .ok()
                .and_then(|o| {
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .next()
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "not installed".into()),
        }
    }

    /// A markdown list, one fact a line.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for (name, value) in [
            ("CPU", format!("{} ({} cores)", self.cpu, self.cores)),
            ("Memory", self.memory.clone()),
            ("Kernel", self.kernel.clone()),
            ("CPU idle", self.cpu_idle.clone()),
            ("Free page reporting", self.free_page_reporting.clone()),
            ("Data disk", self.disk.clone()),
            ("Paddock", self.paddock.clone()),
            ("Apache ZooKeeper", self.zookeeper.clone()),
            ("Java", self.java.clone()),
        ] {
            let _ = writeln!(out, "- {name}: {value}");
        }
        out
    }
}

/// The cpuidle driver, and for a KVM guest's `haltpoll` how long a vCPU
/// polls before it halts.
fn cpu_idle() -> String {
    let read = |path: &str| Some(std::fs::read_to_string(path).ok()?.trim().to_string());
    let Some(driver) = read("/sys/devices/system/cpu/cpuidle/current_driver") else {
        return "unknown".into();
    };
    match read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
        Some(poll_ns) if driver == "haltpoll" => {
            format!("haltpoll, polling {poll_ns} ns before halting (guest_halt_poll_ns)")
        }
        _ => driver,
    }
}

/// `VIRTIO_BALLOON_F_REPORTING`: the feature bit of a virtio balloon that
/// hands the guest's free memory back to its host.
const BALLOON_REPORTING_BIT: usize = 5;

/// Whether the hypervisor takes back the memory this guest frees (a
/// virtio balloon with free page reporting bound): touching that memory
/// again then costs the host's time, which the guest sees as steal, and
/// latency stalls of every process in it (see `launch::stolen_time`).
fn free_page_reporting() -> String {
    let devices = "/sys/bus/virtio/drivers/virtio_balloon";
    let reporting = std::fs::read_dir(devices).ok().and_then(|entries| {
        entries.flatten().find_map(|entry| {
            let features = std::fs::read_to_string(entry.path().join("features")).ok()?;
            Some(features.as_bytes().get(BALLOON_REPORTING_BIT) == Some(&b'1'))
        })
    });
    match reporting {
        Some(true) => "on (a virtio balloon hands freed memory back to the host every 2 s; \
                       touching it again shows as steal)"
            .into(),
        Some(false) => "off (a virtio balloon without it)".into(),
        None => "off (no virtio balloon bound)".into(),
    }
}

/// A command's trimmed standard output, if it ran and succeeded.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fresh_build_knows_the_commit_it_was_built_from() {
        // Built within a checkout, as every test run is: a commit since
        // the last build reruns the build script, which records the new one.
        if super::output("git", &["rev-parse", "HEAD"]).is_some() {
            assert_eq!(super::BUILT_FROM.len(), 40);
            assert_eq!(super::binary_not_of_tree(), None);
        }
    }
}
