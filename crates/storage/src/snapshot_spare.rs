//! The next snapshot is written over the file of the one last pruned.
//!
//! Written into a new file, every byte of a snapshot goes into page-cache
//! pages the kernel first has to find, and on a machine whose free memory
//! goes back to its host (this one's virtio balloon reports free pages
//! every 2 s) taking those pages can cost far more than copying into them:
//! `dd` of 256 MB into a new file took 0.05 to 0.69 s of system time here
//! in one session (the dearer when the pages it was given had gone back to
//! the host), over the cached pages of an existing one 0.04 s. Pages kept
//! in a file are never free, so never go back. Among 1M znodes under
//! writes, that copy (`copy_folio_from_iter_atomic`) was 11.6% of the
//! server's samples, nearly half of what the snapshot thread took
//! (`perf record` over `paddock bench treesize --sizes 0,1000000`). So a
//! snapshot pruned is not removed but kept as the spare, and the next one
//! is written over it: its pages, still cached, are overwritten in place,
//! and its blocks are reused rather than freed and allocated again.
//!
//! A file becomes the spare only when nobody is reading it (a leader still
//! sending it to a follower would otherwise send the next snapshot's bytes
//! under its index; removed gradually instead, it shrinks and the transfer
//! fails, as before), and only when it is no larger than the part of a
//! snapshot the page cache keeps (`direct_after_bytes`): past that part
//! writes bypass the cache anyway, and the spare would cost as much disk as
//! a snapshot. There is at most one spare, so the directory holds one
//! snapshot's worth more than the snapshots retained.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fs::FileSystem;

/// The spare's name in the snapshot directory: not a snapshot's name, so
/// no reader finds it, and not a temp file's, so a restart keeps it.
pub(crate) const SPARE_NAME: &str = "snap.spare";

/// The spare and the readers of each snapshot, so that a snapshot being
/// read is never written over.
#[derive(Debug)]
pub(crate) struct Spare {
    state: Mutex<State>,
    /// The largest file kept as the spare.
    bytes_max: u64,
}

#[derive(Debug)]
struct State {
    /// Open readers, by snapshot index.
    readers: HashMap<u64, usize>,
    /// Whether the spare exists.
    held: bool,
}

impl Spare {
    /// `held`: whether the directory has a spare already.
    pub(crate) fn new(held: bool, bytes_max: u64) -> Arc<Self> {
        Arc::new(Spare {
            state: Mutex::new(State {
                readers: HashMap::new(),
                held,
            }),
            bytes_max,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a reader of the snapshot at `index` while the value returned
    /// lives. Call before opening the file: a snapshot pruned between the
    /// two is then removed, not written over.
    pub(crate) fn reading(self: &Arc<Self>, index: u64) -> Reading {
        *self.state().readers.entry(index).or_default() += 1;
        Reading {
            spare: Arc::clone(self),
            index,
        }
    }

    /// Renames the spare to `temp`, for a snapshot to be written over it.
    /// `false` when there is none.
    pub(crate) fn take(&self, fs: &dyn FileSystem, spare: &Path, temp: &Path) -> io::Result<bool> {
        let mut state = self.state();
        if !state.held {
            return Ok(false);
        }
        state.held = false;
        match fs.rename(spare, temp) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Makes the pruned snapshot at `index`, `path`, of `bytes`, the spare,
    /// if it may be (see the module's comment); `false` when it must be
    /// removed instead. Durable on return: the directory is synced, so
    /// that a crash while the spare is written over cannot leave the
    /// snapshot's name on it.
    pub(crate) fn keep(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
        path: &Path,
        index: u64,
        bytes: u64,
    ) -> io::Result<bool> {
        let mut state = self.state();
        if state.held || bytes > self.bytes_max || state.readers.contains_key(&index) {
            return Ok(false);
        }
        fs.rename(path, &dir.join(SPARE_NAME))?;
        state.held = true;
        fs.sync_dir(dir)?;
        Ok(true)
    }
}

/// One open reader of a snapshot, counted while it lives.
#[derive(Debug)]
pub(crate) struct Reading {
    spare: Arc<Spare>,
    index: u64,
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut state = self.spare.state();
        if let Some(count) = state.readers.get_mut(&self.index) {
            *count -= 1;
            if *count == 0 {
                state.readers.remove(&self.index);
            }
        }
    }
}

impl Reading {
    /// `reader`, counted as this reading while it lives.
    pub(crate) fn guard<R: Read>(self, reader: R) -> Guarded<R> {
        Guarded {
            reader,
            _reading: self,
        }
    }
}

/// A reader of a snapshot that counts as one while it lives.
pub(crate) struct Guarded<R> {
    reader: R,
    _reading: Reading,
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}
