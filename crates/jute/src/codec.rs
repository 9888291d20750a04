//! Jute's primitive encoding: big-endian integers, length-prefixed buffers,
//! strings and vectors, with `-1` as the null length.
//!
//! Every length a peer sends is hostile: [`Reader`] checks each one against
//! the bytes actually left in the frame before it allocates or slices, so a
//! forged length costs an error, never memory.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why a record could not be decoded. Any of these closes the connection
/// that sent it; none of them is a reason to stop the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record truncated: needed {needed} more bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    #[error("negative length {0} (only -1, meaning null, is allowed)")]
    NegativeLength(i32),
    #[error("length {length} exceeds the {remaining} bytes left in the frame")]
    LengthBeyondFrame { length: usize, remaining: usize },
    #[error("null where a value is required: {0}")]
    UnexpectedNull(&'static str),
    #[error("invalid value {value} for {field}")]
    InvalidValue { field: &'static str, value: i64 },
}

/// A cursor over one frame. Slices handed out share the frame's memory.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn need(&self, needed: usize) -> Result<(), DecodeError> {
        if self.buf.len() < needed {
            return Err(DecodeError::Truncated {
                needed,
                remaining: self.buf.len(),
            });
        }
        Ok(())
    }

    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    /// Jute booleans are one byte; any non-zero value is true, as in Java.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_u8()? != 0)
    }

    /// A length prefix: `None` for null (-1), checked against what is left.
    fn read_len(&mut self) -> Result<Option<usize>, DecodeError> {
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(DecodeError::NegativeLength(len));
        }
        let len = len as usize;
        if len > self.buf.len() {
            return Err(DecodeError::LengthBeyondFrame {
                length: len,
                remaining: self.buf.len(),
            });
        }
        Ok(Some(len))
    }

    /// A byte buffer; `None` when the peer sent null.
    pub fn read_buffer(&mut self) -> Result<Option<Bytes>, DecodeError> {
        Ok(self.read_len()?.map(|len| self.buf.split_to(len)))
    }

    /// A byte buffer where null and empty mean the same thing.
    pub fn read_buffer_or_empty(&mut self) -> Result<Bytes, DecodeError> {
        Ok(self.read_buffer()?.unwrap_or_default())
    }

    /// A string; `None` when the peer sent null. Invalid UTF-8 is
    /// replaced with U+FFFD, as Java's `new String(bytes, UTF_8)` in
    /// ZooKeeper's `BinaryInputArchive` does: such a path then fails path
    /// validation (BadArguments) or names no node, as it does there.
    pub fn read_opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self
            .read_buffer()?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// A string where null reads as empty: clients such as kazoo send an
    /// empty string as null (an `auth` ACL's id, say).
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        Ok(self.read_opt_string()?.unwrap_or_default())
    }

    /// A znode path, which must be present: ZooKeeper answers a request
    /// with a null path with a marshalling error (its handlers dereference
    /// it), so null is a decode error here.
    pub fn read_path(&mut self) -> Result<String, DecodeError> {
        self.read_opt_string()?
            .ok_or(DecodeError::UnexpectedNull("path"))
    }

    /// A vector; `None` when the peer sent null. A count below -1 is an
    /// empty vector, as in ZooKeeper's `BinaryInputArchive` (its index is
    /// done once the count is not positive). `min_element_bytes` is the
    /// smallest encoding of one element, so a forged count is rejected
    /// before any allocation proportional to it.
    pub fn read_opt_vec<T>(
        &mut self,
        min_element_bytes: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        let count = self.read_i32()?;
        if count == -1 {
            return Ok(None);
        }
        let count = count.max(0) as usize;
        let min_bytes = count.saturating_mul(min_element_bytes.max(1));
        if min_bytes > self.buf.len() {
            return Err(DecodeError::LengthBeyondFrame {
                length: min_bytes,
                remaining: self.buf.len(),
            });
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(element(self)?);
        }
        Ok(Some(items))
    }

    /// A vector where null is read as empty.
    pub fn read_vec<T>(
        &mut self,
        min_element_bytes: usize,
        element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        Ok(self
            .read_opt_vec(min_element_bytes, element)?
            .unwrap_or_default())
    }

    /// A vector of strings (each at least its 4-byte length).
    pub fn read_string_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        self.read_vec(4, Self::read_string)
    }

    /// A vector of paths where ZooKeeper iterates the list and looks each
    /// path up, so a null list or a null path is a decode error.
    pub fn read_path_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        self.read_opt_vec(4, Self::read_path)?
            .ok_or(DecodeError::UnexpectedNull("path list"))
    }
}

/// How a record reads and writes a path: `String` where a null path is a
/// decode error ([`Reader::read_path`]), `Option<String>` where the server
/// answers a null path itself.
pub trait PathField: Sized {
    fn read(r: &mut Reader) -> Result<Self, DecodeError>;
    fn write(&self, buf: &mut BytesMut);
}

impl PathField for String {
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.read_path()
    }

    fn write(&self, buf: &mut BytesMut) {
        buf.write_string(self);
    }
}

impl PathField for Option<String> {
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.read_opt_string()
    }

    fn write(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.as_deref());
    }
}

/// Writing primitives onto a growable buffer.
pub trait WriteExt {
    fn write_i32(&mut self, v: i32);
    fn write_i64(&mut self, v: i64);
    fn write_bool(&mut self, v: bool);
    fn write_buffer(&mut self, v: &[u8]);
    fn write_opt_buffer(&mut self, v: Option<&[u8]>);
    fn write_string(&mut self, v: &str);
    fn write_opt_string(&mut self, v: Option<&str>);
    fn write_string_vec(&mut self, v: &[String]);
}

impl WriteExt for BytesMut {
    fn write_i32(&mut self, v: i32) {
        self.put_i32(v);
    }

    fn write_i64(&mut self, v: i64) {
        self.put_i64(v);
    }

    fn write_bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }

    fn write_buffer(&mut self, v: &[u8]) {
        self.put_i32(jute_len(v.len()));
        self.put_slice(v);
    }

    fn write_opt_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => self.write_buffer(v),
            None => self.put_i32(-1),
        }
    }

    fn write_string(&mut self, v: &str) {
        self.write_buffer(v.as_bytes());
    }

    fn write_opt_string(&mut self, v: Option<&str>) {
        self.write_opt_buffer(v.map(str::as_bytes));
    }

    fn write_string_vec(&mut self, v: &[String]) {
        self.put_i32(jute_len(v.len()));
        for s in v {
            self.write_string(s);
        }
    }
}

/// Lengths on the wire are `i32`. Our own values are bounded far below that
/// by `jute.maxbuffer`, so exceeding it is a programming error.
pub fn jute_len(len: usize) -> i32 {
    i32::try_from(len).expect("jute length exceeds i32::MAX")
}

/// A record with one definition for both directions.
pub trait Record: Sized {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;
    fn encode(&self, buf: &mut BytesMut);

    /// Decodes a record that must fill `bytes` from the start.
    fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        Self::decode(&mut Reader::new(bytes))
    }

    fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::new();
        self.encode(&mut buf);
        buf.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_lengths_are_rejected_before_allocation() {
        let mut buf = BytesMut::new();
        buf.write_i32(i32::MAX);
        let mut r = Reader::new(buf.freeze());
        assert!(matches!(
            r.read_buffer(),
            Err(DecodeError::LengthBeyondFrame { .. })
        ));

        let mut buf = BytesMut::new();
        buf.write_i32(1 << 30);
        let mut r = Reader::new(buf.freeze());
        assert!(r.read_string_vec().is_err());

        let mut buf = BytesMut::new();
        buf.write_i32(-7);
        assert_eq!(
            Reader::new(buf.freeze()).read_buffer(),
            Err(DecodeError::NegativeLength(-7))
        );
    }

    #[test]
    fn null_buffer_and_string() {
        let mut buf = BytesMut::new();
        for _ in 0..4 {
            buf.write_opt_buffer(None);
        }
        let mut r = Reader::new(buf.freeze());
        assert_eq!(r.read_buffer(), Ok(None));
        assert_eq!(r.read_opt_string(), Ok(None));
        assert_eq!(r.read_string(), Ok(String::new()));
        assert_eq!(r.read_path(), Err(DecodeError::UnexpectedNull("path")));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let mut buf = BytesMut::new();
        buf.write_buffer(b"/a\xff");
        assert_eq!(
            Reader::new(buf.freeze()).read_string(),
            Ok("/a\u{fffd}".to_owned())
        );
    }
}
