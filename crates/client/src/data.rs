//! Znode data as callers hand it to the client.
//!
//! ZooKeeper keeps null data (Java's `null`, kazoo's `None`, a buffer of
//! length -1 on the wire) apart from empty data: both have `dataLength` 0,
//! but a read answers null for the one and an empty buffer for the other,
//! and programs tell them apart (Kafka reads a null
//! `/latest_producer_id_block` as "no block yet"). So writes take anything
//! that is [`IntoData`], `None` included, and reads answer `Option<Bytes>`.

use bytes::Bytes;

/// What a create or setData writes: bytes (copied once into the request),
/// or null when given `None`.
///
/// ```
/// use client::IntoData;
/// assert_eq!(b"v1".into_data().as_deref(), Some(&b"v1"[..]));
/// assert_eq!(None.into_data(), None);
/// ```
pub trait IntoData {
    fn into_data(self) -> Option<Bytes>;
}

impl IntoData for &[u8] {
    fn into_data(self) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(self))
    }
}

impl<const N: usize> IntoData for &[u8; N] {
    fn into_data(self) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(self))
    }
}

impl IntoData for &Vec<u8> {
    fn into_data(self) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(self))
    }
}

impl IntoData for Vec<u8> {
    fn into_data(self) -> Option<Bytes> {
        Some(Bytes::from(self))
    }
}

impl IntoData for Bytes {
    fn into_data(self) -> Option<Bytes> {
        Some(self)
    }
}

impl IntoData for &Bytes {
    fn into_data(self) -> Option<Bytes> {
        Some(self.clone())
    }
}

/// `None` is null data.
impl IntoData for Option<&[u8]> {
    fn into_data(self) -> Option<Bytes> {
        self.map(Bytes::copy_from_slice)
    }
}
