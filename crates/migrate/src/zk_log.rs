//! Apache ZooKeeper's transaction logs (`version-2/log.<first zxid in
//! hex>`), read in order (`FileTxnLog`).
//!
//! ```text
//! header: magic "ZKLG", version 2, dbid i64
//! records: (Adler-32 of the entry as i64, entry buffer, 'B')*
//!   entry: TxnHeader (clientId i64, cxid i32, zxid i64, time i64,
//!          type i32), the txn record, since 3.6 a digest
//! then zeros: ZooKeeper preallocates, and a zero length is the end
//! ```

use std::io::{BufReader, Read};
use std::path::PathBuf;

use bytes::Bytes;

use crate::error::MigrateError;
use crate::java_io::{read_file_header, JavaIn, ReadError};
use crate::zk_txn::LoggedTxn;

/// `FileTxnLog.TXNLOG_MAGIC`.
const LOG_MAGIC: &[u8; 4] = b"ZKLG";
const LOG_VERSION: i32 = 2;
/// The byte after every entry (`Util.writeTxnBytes`).
const END_OF_RECORD: u8 = b'B';
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// A log file and the zxid its name gives (its first txn's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub path: PathBuf,
    pub zxid: i64,
}

/// How a log file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// At the end of the file or of what ZooKeeper preallocated.
    Clean,
    /// In the middle of an entry that was being written: a crash. What is
    /// before it is whole; ZooKeeper, too, stops there.
    Torn { offset: u64 },
}

/// Reads the entries of `file` in order, handing each to `each`. A torn
/// last entry ends the file; a checksum that does not match, or an entry
/// that does not decode, is damage.
pub fn read(
    file: &LogFile,
    mut each: impl FnMut(LoggedTxn) -> Result<(), MigrateError>,
) -> Result<LogEnd, MigrateError> {
    let damaged = |source: ReadError| MigrateError::Damaged {
        file: file.path.clone(),
        source,
    };
    let opened = crate::error::open(&file.path)?;
    let mut input = JavaIn::new(BufReader::with_capacity(READ_BUFFER_BYTES, opened));
    read_file_header(&mut input, LOG_MAGIC, LOG_VERSION).map_err(damaged)?;
    loop {
        match read_entry(&mut input) {
            Ok(Entry::Txn(at, bytes)) => {
                let txn = LoggedTxn::decode(bytes)
                    .map_err(|e| damaged(input.invalid("txn", at, e.to_string())))?;
                each(txn)?;
            }
            Ok(Entry::End) => return Ok(LogEnd::Clean),
            Ok(Entry::Torn(offset)) => return Ok(LogEnd::Torn { offset }),
            Err(e) => return Err(damaged(e)),
        }
    }
}

enum Entry {
    /// Where the entry starts, and its bytes.
    Txn(u64, Bytes),
    End,
    Torn(u64),
}

/// `FileTxnIterator.next`: an entry, the end, or a torn tail.
fn read_entry<R: Read>(input: &mut JavaIn<R>) -> Result<Entry, ReadError> {
    let at = input.offset();
    let stored = match input.i64("entry checksum") {
        Ok(stored) => stored,
        Err(e) if e.is_end_of_input() => return Ok(Entry::End),
        Err(e) => return Err(e),
    };
    let bytes = match input.buffer("entry") {
        Ok(Some(bytes)) if !bytes.is_empty() => bytes,
        Ok(_) => return Ok(Entry::End),
        Err(e) if e.is_end_of_input() => return Ok(Entry::Torn(at)),
        Err(e) => return Err(e),
    };
    match input.u8("end of entry") {
        Ok(END_OF_RECORD) => {}
        Ok(_) => return Ok(Entry::Torn(at)),
        Err(e) if e.is_end_of_input() => return Ok(Entry::Torn(at)),
        Err(e) => return Err(e),
    }
    let mut adler = adler2::Adler32::new();
    adler.write_slice(&bytes);
    if i64::from(adler.checksum()) != stored {
        return Err(input.invalid(
            "entry checksum",
            at,
            format!(
                "stored {stored:#x}, computed {:#x}: the log is damaged",
                adler.checksum()
            ),
        ));
    }
    Ok(Entry::Txn(at, Bytes::from(bytes)))
}
