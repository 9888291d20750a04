//! A znode's data in twelve bytes of the node: a pointer to exactly the
//! bytes, and their length in four. `Option<Box<[u8]>>` takes sixteen, and
//! those four bytes are what keep a node out of the allocator's next size
//! class (see `Node`).

use std::fmt;
use std::ptr::NonNull;

/// Null (Java's `null`, which ZooKeeper stores and answers apart from
/// empty), empty, or bytes of their own allocation.
//
// `packed(4)`: the length fills the four bytes the node's stat leaves at
// its end, where an eight-byte alignment would add four more.
#[repr(C, packed(4))]
pub(crate) struct NodeData {
    /// `None` is null; empty data points at no allocation (dangling).
    bytes: Option<NonNull<u8>>,
    len: u32,
}

// Bytes owned by this value alone, as a `Box<[u8]>` is, and changed only
// through `&mut self`.
unsafe impl Send for NodeData {}
unsafe impl Sync for NodeData {}

impl NodeData {
    pub(crate) const NULL: NodeData = NodeData {
        bytes: None,
        len: 0,
    };

    /// The bytes, or `None` for null data.
    pub(crate) fn as_deref(&self) -> Option<&[u8]> {
        let (bytes, len) = (self.bytes?, self.len as usize);
        // Safety: `bytes` is the start of `len` bytes this value owns (a
        // leaked box, or dangling when `len` is 0), unchanged since.
        Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr(), len) })
    }

    /// `dataLength`: 0 for null data, as `DataNode.copyStat` counts it.
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Copies `data` over these bytes if it is as long as they are, and
    /// says whether it did: no allocation is made or freed, and the bytes
    /// written are the ones the apply loop prefetched (see `Nodes::prefetch`),
    /// where a new allocation's lines are rarely in the cache.
    pub(crate) fn overwrite(&mut self, data: &[u8]) -> bool {
        let Some(bytes) = self.bytes else {
            return false;
        };
        if data.len() != self.len() {
            return false;
        }
        // Safety: `bytes` is the start of `len` bytes this value owns
        // alone (`&mut self`), dangling but aligned when `len` is 0, and
        // `data` is another allocation's.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), bytes.as_ptr(), data.len()) };
        true
    }
}

impl From<Option<Box<[u8]>>> for NodeData {
    fn from(data: Option<Box<[u8]>>) -> Self {
        let Some(data) = data else {
            return NodeData::NULL;
        };
        // Data comes in a frame, whose length is an i32.
        let len = u32::try_from(data.len()).expect("znode data is shorter than 4 GiB");
        let bytes = NonNull::new(Box::into_raw(data).cast::<u8>());
        NodeData { bytes, len }
    }
}

impl Drop for NodeData {
    fn drop(&mut self) {
        if let Some(bytes) = self.bytes {
            let slice = std::ptr::slice_from_raw_parts_mut(bytes.as_ptr(), self.len as usize);
            // Safety: the slice is the box `From` leaked, whole, and this is
            // its only owner.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl Clone for NodeData {
    fn clone(&self) -> Self {
        NodeData::from(self.as_deref().map(Box::from))
    }
}

impl PartialEq for NodeData {
    fn eq(&self, other: &Self) -> bool {
        self.as_deref() == other.as_deref()
    }
}

impl Eq for NodeData {}

impl fmt::Debug for NodeData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_deref(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_empty_and_bytes_read_back_apart() {
        assert_eq!(std::mem::size_of::<NodeData>(), 12);
        let null = NodeData::from(None);
        let empty = NodeData::from(Some(Box::from(&b""[..])));
        let bytes = NodeData::from(Some(Box::from(&b"some data"[..])));
        assert_eq!(null.as_deref(), None);
        assert_eq!(empty.as_deref(), Some(&b""[..]));
        assert_eq!(bytes.as_deref(), Some(&b"some data"[..]));
        assert_eq!((null.len(), empty.len(), bytes.len()), (0, 0, 9));
        assert_ne!(null, empty);
    }

    #[test]
    fn only_bytes_of_the_same_length_are_overwritten() {
        let mut bytes = NodeData::from(Some(Box::from(&b"old"[..])));
        assert!(bytes.overwrite(b"new"));
        assert_eq!(bytes.as_deref(), Some(&b"new"[..]));
        assert!(!bytes.overwrite(b"longer"));
        assert_eq!(bytes.as_deref(), Some(&b"new"[..]));
        let mut null = NodeData::NULL;
        let mut empty = NodeData::from(Some(Box::default()));
        assert!(!null.overwrite(b""));
        assert!(empty.overwrite(b""));
        assert_eq!((null.as_deref(), empty.as_deref()), (None, Some(&b""[..])));
    }

    #[test]
    fn a_clone_owns_a_copy() {
        let original = NodeData::from(Some(vec![7u8; 1000].into_boxed_slice()));
        let copy = original.clone();
        assert_eq!(copy, original);
        assert_ne!({ copy.bytes }, { original.bytes });
        drop(original);
        assert_eq!(copy.as_deref(), Some(&[7u8; 1000][..]));
    }
}
