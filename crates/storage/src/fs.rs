//! The file seam: every byte this crate reads or writes goes through
//! [`FileSystem`], so tests can wrap [`StdFs`] to fail an fsync, cut a write
//! short, or corrupt what is read.
//!
//! The surface is deliberately narrow: the handful of calls the log and the
//! snapshot store need, with the durability meaning of each spelled out.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek};
use std::path::Path;

/// A file opened for reading, positioned at its start.
pub trait ReadableFile: Read + Seek + Send {}

impl<T: Read + Seek + Send> ReadableFile for T {}

/// A file opened for writing.
pub trait WritableFile: Send + Debug {
    /// Writes all of `buf` at byte offset `offset` of the file (a file offset,
    /// not an index). A failure may leave any prefix of `buf` written.
    fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// Truncates or extends (with zeros) the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Extends the file (with zeros) to at least `len` bytes with disk space
    /// reserved, so that writes within them cannot fail for lack of space: a
    /// full disk shows here instead. Where the file system cannot reserve
    /// space, only extends the file, sparse.
    fn allocate(&mut self, len: u64) -> io::Result<()>;
    /// `fdatasync`: the data written so far, and the file size, are durable on return.
    fn sync_data(&mut self) -> io::Result<()>;
    /// `fsync`: data and all metadata are durable on return.
    fn sync_all(&mut self) -> io::Result<()>;
    /// Another handle to the same open file (a duplicated descriptor), so
    /// that another thread can sync what this one writes.
    fn try_clone(&self) -> io::Result<Box<dyn WritableFile>>;
    /// Starts writing `len` bytes from `offset` to disk and, with `wait`,
    /// waits until they are written, without making anything durable (no
    /// metadata, no device cache flush): it only keeps the dirty pages of a
    /// long write few, so that the final sync is short and other files'
    /// syncs never queue behind a flood of them. A hint: where the system
    /// has no such call it does nothing.
    fn write_back(&mut self, offset: u64, len: u64, wait: bool) -> io::Result<()> {
        let _ = (offset, len, wait);
        Ok(())
    }
}

/// The directory and file operations this crate uses.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates `dir` and its missing parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of `dir` (names that are not UTF-8 are left out:
    /// this crate never creates one).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadableFile>>;
    /// Creates a new file for writing; fails if it exists.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for writing, without truncating it.
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for writes that bypass the page cache
    /// (`O_DIRECT`): each must start at an offset and have a length that
    /// are multiples of [`DIRECT_ALIGN_BYTES`], from memory aligned alike,
    /// and a write that is not may fail with `InvalidInput`. `None` where
    /// the file system has no such writes.
    fn open_direct(&self, path: &Path) -> io::Result<Option<Box<dyn WritableFile>>> {
        let _ = path;
        Ok(None)
    }
    /// Atomically renames `from` to `to`, replacing `to`. Durable only after
    /// [`FileSystem::sync_dir`] of the directory.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file. Durable only after [`FileSystem::sync_dir`].
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the creations, renames and removals of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The alignment of a write through [`FileSystem::open_direct`]: a page,
/// which every Linux file system and block device of ours accepts.
pub const DIRECT_ALIGN_BYTES: usize = 4096;

/// The real file system, through `std::fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdFs;

#[derive(Debug)]
struct StdWritableFile {
    file: File,
}

impl WritableFile for StdWritableFile {
    #[cfg(unix)]
    fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.file, buf, offset)
    }

    #[cfg(not(unix))]
    fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        use std::io::{SeekFrom, Write};
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.write_all(buf)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(target_os = "linux")]
    fn allocate(&mut self, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let len = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file length too large"))?;
        // SAFETY: fallocate(2) on a descriptor we own, with plain integers.
        if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) } == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return self.grow_to(len as u64);
        }
        Err(error)
    }

    #[cfg(not(target_os = "linux"))]
    fn allocate(&mut self, len: u64) -> io::Result<()> {
        self.grow_to(len)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn try_clone(&self) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(StdWritableFile {
            file: self.file.try_clone()?,
        }))
    }

    #[cfg(target_os = "linux")]
    fn write_back(&mut self, offset: u64, len: u64, wait: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let range = |n: u64| {
            libc::off64_t::try_from(n)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file range too large"))
        };
        let flags = if wait {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER
        } else {
            libc::SYNC_FILE_RANGE_WRITE
        };
        // SAFETY: sync_file_range(2) on a descriptor we own, with plain integers.
        let done = unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), range(offset)?, range(len)?, flags)
        };
        if done == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl StdWritableFile {
    fn grow_to(&mut self, len: u64) -> io::Result<()> {
        if self.file.metadata()?.len() < len {
            self.file.set_len(len)?;
        }
        Ok(())
    }
}

impl FileSystem for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadableFile>> {
        Ok(Box::new(File::open(path)?))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(StdWritableFile { file }))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().write(true).open(path)?;
        Ok(Box::new(StdWritableFile { file }))
    }

    #[cfg(target_os = "linux")]
    fn open_direct(&self, path: &Path) -> io::Result<Option<Box<dyn WritableFile>>> {
        use std::os::unix::fs::OpenOptionsExt;
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(file) => Ok(Some(Box::new(StdWritableFile { file }))),
            // A file system without direct I/O (tmpfs before Linux 6.6).
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // On Linux a directory opened read-only can be fsynced; that makes its
        // entries (created, renamed, removed files) durable.
        File::open(dir)?.sync_all()
    }
}

/// `dir`'s parent, if it has a non-empty one (for syncing a new directory's entry).
pub(crate) fn parent_dir(dir: &Path) -> Option<&Path> {
    dir.parent().filter(|p| !p.as_os_str().is_empty())
}
