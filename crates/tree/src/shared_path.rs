//! A znode's full path, shared by the nodes map and the parent's set of
//! children: one pointer to one allocation holding a count, the length and
//! the bytes.
//!
//! Every znode's path is held twice (its key in the nodes map and an entry
//! in its parent's children), so what a path costs is paid per znode. An
//! `Arc<str>` is a two-word pointer to two counts and the bytes: 32 bytes
//! of pointers and 16 of header around each path. This is half of each:
//! the length lives with the bytes, and there are no weak references to
//! count. A path of up to 24 bytes then fits the allocator's 32-byte size
//! class instead of its 48-byte one. Among 1M znodes of 128 bytes this
//! took the bare tree from 378-379 MB to 341-342 (`cargo run --release -p tree
//! --example tree_costs -- 1000000 200000`).

use std::alloc::{self, Layout};
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{self, AtomicU32, Ordering};

/// An immutable, reference-counted path; clones share the bytes.
pub(crate) struct SharedPath {
    header: NonNull<Header>,
}

/// What the allocation starts with; the path's bytes follow it.
#[repr(C)]
struct Header {
    count: AtomicU32,
    len: u32,
}

/// What [`SharedPath::prefetch`] loads from the header on: the header and
/// a path of up to 56 bytes, one line or two.
const PREFETCHED_BYTES: usize = 64;

/// Beyond this many clones a count could wrap; like `Arc`, give up rather
/// than free what is still referenced.
const COUNT_MAX: u32 = u32::MAX / 2;

// The bytes are immutable and the count atomic, as in `Arc<str>`.
unsafe impl Send for SharedPath {}
unsafe impl Sync for SharedPath {}

impl SharedPath {
    fn layout(len: usize) -> Layout {
        Layout::new::<Header>()
            .extend(Layout::array::<u8>(len).expect("a path fits in memory"))
            .expect("a path fits in memory")
            .0
    }

    /// Starts loading the count a clone adds to.
    pub(crate) fn prefetch_count(&self) {
        crate::prefetch::line(self.header.as_ptr().cast());
    }

    /// Starts loading the path: its header and the bytes of a path of
    /// usual length after it. Prefetching `&**self` would wait for the
    /// header, to read the length, which is the miss a prefetch is for.
    pub(crate) fn prefetch(&self) {
        crate::prefetch::bytes(self.header.as_ptr().cast(), PREFETCHED_BYTES);
    }

    fn header(&self) -> &Header {
        // Safety: the allocation lives while this reference to it does.
        unsafe { self.header.as_ref() }
    }
}

impl From<&str> for SharedPath {
    fn from(path: &str) -> Self {
        // A path comes in a frame, whose length is an i32.
        let len = u32::try_from(path.len()).expect("a path is shorter than 4 GiB");
        let layout = Self::layout(path.len());
        // Safety: the layout has a header, so its size is not zero; the
        // header and then the bytes are written before the pointer is used.
        unsafe {
            let Some(header) = NonNull::new(alloc::alloc(layout).cast::<Header>()) else {
                alloc::handle_alloc_error(layout)
            };
            header.as_ptr().write(Header {
                count: AtomicU32::new(1),
                len,
            });
            let bytes = header.as_ptr().add(1).cast::<u8>();
            std::ptr::copy_nonoverlapping(path.as_ptr(), bytes, path.len());
            SharedPath { header }
        }
    }
}

impl From<String> for SharedPath {
    fn from(path: String) -> Self {
        SharedPath::from(path.as_str())
    }
}

impl Deref for SharedPath {
    type Target = str;

    fn deref(&self) -> &str {
        let len = self.header().len as usize;
        // Safety: `len` bytes of a `str` were copied in after the header
        // when this was made, and are never changed.
        unsafe {
            let bytes = self.header.as_ptr().add(1).cast::<u8>();
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, len))
        }
    }
}

impl Clone for SharedPath {
    fn clone(&self) -> Self {
        // As `Arc::clone`: a new reference needs no ordering with others,
        // as the one it is made from keeps the bytes alive meanwhile.
        let before = self.header().count.fetch_add(1, Ordering::Relaxed);
        if before > COUNT_MAX {
            std::process::abort();
        }
        SharedPath {
            header: self.header,
        }
    }
}

impl Drop for SharedPath {
    fn drop(&mut self) {
        // As `Arc`'s drop: the last owner frees the bytes, after every
        // other owner's use of them (release, then acquire).
        if self.header().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        atomic::fence(Ordering::Acquire);
        let layout = Self::layout(self.header().len as usize);
        // Safety: this was the last reference, and the layout is the one
        // the allocation was made with.
        unsafe { alloc::dealloc(self.header.as_ptr().cast(), layout) }
    }
}

impl Borrow<str> for SharedPath {
    fn borrow(&self) -> &str {
        self
    }
}

impl AsRef<str> for SharedPath {
    fn as_ref(&self) -> &str {
        self
    }
}

impl PartialEq for SharedPath {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header || **self == **other
    }
}

impl Eq for SharedPath {}

impl PartialOrd for SharedPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

/// As `str` hashes, so that a `&str` finds its `SharedPath` in a map.
impl Hash for SharedPath {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl fmt::Debug for SharedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for SharedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn is_one_pointer_and_reads_back_what_it_was_made_from() {
        assert_eq!(std::mem::size_of::<SharedPath>(), 8);
        assert_eq!(std::mem::size_of::<Option<SharedPath>>(), 8);
        for path in [
            "",
            "/",
            "/a",
            "/zookeeper/quota",
            &"/x".repeat(5000),
            "/é/ü",
        ] {
            let shared = SharedPath::from(path);
            assert_eq!(&*shared, path);
            assert_eq!(shared.len(), path.len());
        }
    }

    #[test]
    fn clones_share_the_bytes_until_the_last_is_dropped() {
        let first = SharedPath::from("/a/b");
        let second = first.clone();
        assert_eq!(first.header, second.header);
        assert_eq!(first.header().count.load(Ordering::Relaxed), 2);
        drop(first);
        assert_eq!(second.header().count.load(Ordering::Relaxed), 1);
        assert_eq!(&*second, "/a/b");
    }

    #[test]
    fn compares_orders_and_hashes_as_its_str() {
        let (a, b) = (SharedPath::from("/a"), SharedPath::from("/b"));
        assert!(a < b);
        assert_eq!(a, SharedPath::from("/a"));
        assert_ne!(a, b);
        let map: HashMap<SharedPath, u32> = [(a.clone(), 1), (b.clone(), 2)].into();
        assert_eq!(map.get("/a"), Some(&1));
        assert_eq!(map.get("/b"), Some(&2));
        assert_eq!(format!("{a} {b:?}"), "/a \"/b\"");
    }

    #[test]
    fn threads_clone_and_drop_one_path_concurrently() {
        let path = SharedPath::from("/shared/between/threads");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10_000 {
                        let clone = path.clone();
                        assert_eq!(&*clone, "/shared/between/threads");
                    }
                });
            }
        });
        assert_eq!(path.header().count.load(Ordering::Relaxed), 1);
    }
}
