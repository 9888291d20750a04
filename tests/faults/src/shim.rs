//! The fault shim's side in the harness: the shim (tests/faults/shim) is
//! preloaded into every server and reads a small control file, one per
//! server, which this writes while the server runs to slow its fsyncs and
//! shift its clocks.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};

/// The library cargo builds from tests/faults/shim, next to this binary.
const LIBRARY: &str = "libfault_shim.so";
/// The shim's environment variable naming its control file.
const CONTROL_ENV: &str = "PADDOCK_FAULT_SHIM";

// Offsets of the control fields, as the shim's crate docs lay them out.
// The shim cannot be linked in to share them: its fsync and clock_gettime
// would replace this process's own.
const FSYNC_DELAY: u64 = 0;
const REALTIME_OFFSET: u64 = 8;
const MONOTONIC_OFFSET: u64 = 16;

pub struct Shim {
    library: PathBuf,
    dir: PathBuf,
}

impl Shim {
    /// Finds the library and creates zeroed control files for servers
    /// `1..=servers` in `dir`: they must exist before the servers start.
    pub fn new(dir: &Path, servers: usize) -> anyhow::Result<Shim> {
        let exe = std::env::current_exe().context("finding the faults binary")?;
        let library = exe.with_file_name(LIBRARY);
        if !library.exists() {
            bail!(
                "{} does not exist: build it with `cargo build -p fault-shim` (or `cargo build --workspace`)",
                library.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let shim = Shim { library, dir };
        for id in 1..=servers {
            let path = shim.control(id);
            std::fs::write(&path, [0u8; 24])
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(shim)
    }

    /// What makes a server process load the shim (`{id}` is launch's).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".into(), self.library.display().to_string()),
            (
                CONTROL_ENV.into(),
                self.dir.join("{id}.ctl").display().to_string(),
            ),
        ]
    }

    /// Fails unless server `id`, process `pid`, has loaded the shim and
    /// mapped its control file: otherwise the disk and clock faults would
    /// change nothing, and their scenarios would pass having tested nothing.
    pub fn check_loaded(&self, id: usize, pid: u32) -> anyhow::Result<()> {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .with_context(|| format!("reading the memory map of server.{id} (pid {pid})"))?;
        let control = self.control(id);
        if !maps.contains(&*control.to_string_lossy()) {
            bail!(
                "server.{id} (pid {pid}) has not mapped {}: the fault shim is not loaded, so disk and clock faults would do nothing",
                control.display()
            );
        }
        Ok(())
    }

    /// Every fsync and fdatasync of server `id` first waits `delay`.
    pub fn slow_disk(&self, id: usize, delay: Duration) -> anyhow::Result<()> {
        self.write(id, FSYNC_DELAY, delay.as_micros() as u64)
    }

    /// Server `id`'s wall clock reads `offset_ns` away from the truth.
    pub fn shift_realtime(&self, id: usize, offset_ns: i64) -> anyhow::Result<()> {
        self.write(id, REALTIME_OFFSET, offset_ns as u64)
    }

    /// Server `id`'s monotonic clock jumps `by` forward (for good: it
    /// never goes back).
    pub fn jump_monotonic(&self, id: usize, by: Duration) -> anyhow::Result<()> {
        let now = self.read(id, MONOTONIC_OFFSET)?;
        self.write(id, MONOTONIC_OFFSET, now + by.as_nanos() as u64)
    }

    /// Disk at full speed, wall clock true, for every server.
    pub fn heal(&self, servers: usize) -> anyhow::Result<()> {
        for id in 1..=servers {
            self.slow_disk(id, Duration::ZERO)?;
            self.shift_realtime(id, 0)?;
        }
        Ok(())
    }

    fn control(&self, id: usize) -> PathBuf {
        self.dir.join(format!("{id}.ctl"))
    }

    // In place, never truncating: the server maps the file, and a read of
    // a mapped page past the end of the file would kill it.
    fn write(&self, id: usize, offset: u64, value: u64) -> anyhow::Result<()> {
        let path = self.control(id);
        let file = File::options()
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.write_all_at(&value.to_le_bytes(), offset)
            .with_context(|| format!("writing {}", path.display()))
    }

    fn read(&self, id: usize, offset: u64) -> anyhow::Result<u64> {
        let path = self.control(id);
        let mut bytes = [0u8; 8];
        File::open(&path)
            .and_then(|file| file.read_exact_at(&mut bytes, offset))
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(u64::from_le_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    use super::*;

    /// A program run with the shim's environment sees the shifted wall
    /// clock and the slow fsync, and passes `check_loaded`; this process,
    /// which did not load the shim, fails it.
    #[test]
    fn a_preloaded_program_sees_the_shifted_clock_and_the_slow_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shim = Shim::new(dir.path(), 1).expect("the shim library");
        let day = Duration::from_secs(86_400);
        shim.shift_realtime(1, day.as_nanos() as i64)
            .expect("shift");
        shim.slow_disk(1, Duration::from_millis(300)).expect("slow");
        // Reports its wall clock and one fsync's duration, then waits for
        // its stdin to close so that its memory map can be looked at.
        let script = "import os, sys, time\n\
                      f = open(os.environ['FILE'], 'w')\n\
                      start = time.monotonic()\n\
                      os.fsync(f.fileno())\n\
                      print(time.time(), time.monotonic() - start, flush=True)\n\
                      sys.stdin.read()\n";
        let mut command = Command::new("python3");
        command
            .args(["-c", script])
            .env("FILE", dir.path().join("synced"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (key, value) in shim.env() {
            command.env(key, value.replace("{id}", "1"));
        }
        let mut child = command.spawn().expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("its report");
        let loaded = shim.check_loaded(1, child.id());
        drop(child.stdin.take());
        child.wait().expect("python3 exits");

        let truth = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let [wall, fsync]: [f64; 2] = line
            .split_whitespace()
            .map(|field| field.parse().expect("a number"))
            .collect::<Vec<_>>()
            .try_into()
            .expect("two numbers");
        let shift = wall - truth;
        assert!(
            (shift - day.as_secs_f64()).abs() < 60.0,
            "the wall clock moved {shift} s"
        );
        assert!(fsync >= 0.3, "the fsync took {fsync} s");
        loaded.expect("the program loaded the shim");
        assert!(shim.check_loaded(1, std::process::id()).is_err());
    }
}
