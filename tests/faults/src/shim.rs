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
