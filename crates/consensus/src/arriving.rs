//! A snapshot arriving from the leader, readable while it arrives.
//!
//! A follower far behind is sent the leader's whole snapshot file. Written
//! to disk and then read back, its state machine could only start decoding
//! once the last piece was durable, and a 1 GB catch-up (`paddock bench
//! catchup --start paddock --servers 3 --megabytes 1024`) spent a quarter
//! of its time decoding after the transfer had ended. Each piece written is
//! also handed to an [`ArrivingSnapshot`], which the state machine reads
//! on a thread of its own while the rest comes in.
//!
//! An arriving snapshot ends well only once its file is durable: the end
//! is marked after the store's fsync, so a reader that finishes has read
//! exactly what a restart would find on disk.

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use bytes::{Buf, Bytes};

use crate::snapshot::SnapshotMeta;
use crate::Error;

/// Pieces the disk writer may be ahead of the reader. Past it the writer
/// waits, and so does the transfer: the pieces waiting stay bounded.
const PIECES_AHEAD: usize = 8;

/// What the writer hands the reader: a piece, or the end of a snapshot
/// that is now durable.
enum Handed {
    Piece(Bytes),
    Durable,
}

/// The writer's end. Dropped before [`Tee::durable`], the snapshot was
/// not kept, and its reader fails.
pub(crate) struct Tee {
    /// `None` once the reader stopped reading.
    to_reader: Option<SyncSender<Handed>>,
}

/// A snapshot's bytes as they arrive, in the order of its file: the raft
/// metadata ([`ArrivingSnapshot::read_meta`]), then the state machine's
/// own bytes. A read blocks until the next piece is written here, and
/// fails if the transfer is given up or its file could not be made
/// durable.
pub struct ArrivingSnapshot {
    index: u64,
    pieces: Receiver<Handed>,
    current: Bytes,
    durable: bool,
}

/// A reader and the writer's end that feeds it, for the snapshot at `index`.
pub(crate) fn tee(index: u64) -> (Tee, ArrivingSnapshot) {
    let (to_reader, pieces) = sync_channel(PIECES_AHEAD);
    let arriving = ArrivingSnapshot {
        index,
        pieces,
        current: Bytes::new(),
        durable: false,
    };
    let tee = Tee {
        to_reader: Some(to_reader),
    };
    (tee, arriving)
}

impl Tee {
    /// Hands a piece just written to the reader, waiting while it is
    /// `PIECES_AHEAD` behind. A reader that stopped is left alone.
    pub(crate) fn piece(&mut self, piece: Bytes) {
        self.hand(Handed::Piece(piece));
    }

    /// The file is durable: the reader may end.
    pub(crate) fn durable(mut self) {
        self.hand(Handed::Durable);
    }

    fn hand(&mut self, handed: Handed) {
        if let Some(to_reader) = &self.to_reader {
            if to_reader.send(handed).is_err() {
                self.to_reader = None;
            }
        }
    }
}

impl ArrivingSnapshot {
    /// The log index the snapshot is at, as raft announced it.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Reads the raft metadata at the head of the snapshot.
    pub fn read_meta(&mut self) -> Result<SnapshotMeta, Error> {
        SnapshotMeta::read_from(self)
    }

    /// Waits for the end of the snapshot: `Ok` once its file is durable
    /// here and everything in it was read.
    pub fn finish(mut self) -> io::Result<()> {
        let mut rest = [0u8; 1];
        match self.read(&mut rest)? {
            0 => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the snapshot goes on past what was read of it",
            )),
        }
    }
}

impl Read for ArrivingSnapshot {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if self.durable {
                return Ok(0);
            }
            match self.pieces.recv() {
                Ok(Handed::Piece(piece)) => self.current = piece,
                Ok(Handed::Durable) => self.durable = true,
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the snapshot was not kept: its transfer was given up or its file could not be written",
                    ))
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(mut arriving: ArrivingSnapshot) -> io::Result<Vec<u8>> {
        let mut all = Vec::new();
        arriving.read_to_end(&mut all)?;
        Ok(all)
    }

    #[test]
    fn the_pieces_are_read_in_order_and_end_once_durable() {
        let (mut tee, arriving) = tee(7);
        assert_eq!(arriving.index(), 7);
        let reader = std::thread::spawn(move || read_all(arriving));
        for piece in [&b"ab"[..], b"", b"cde"] {
            tee.piece(Bytes::copy_from_slice(piece));
        }
        tee.durable();
        assert_eq!(reader.join().unwrap().unwrap(), b"abcde");
    }

    #[test]
    fn a_snapshot_not_kept_fails_its_reader_even_after_every_piece() {
        let (mut tee, arriving) = tee(7);
        let reader = std::thread::spawn(move || read_all(arriving));
        tee.piece(Bytes::from_static(b"all of it"));
        drop(tee);
        let error = reader.join().unwrap().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn finish_refuses_bytes_left_unread() {
        let (mut tee, mut arriving) = tee(7);
        tee.piece(Bytes::from_static(b"abc"));
        tee.durable();
        let mut two = [0u8; 2];
        arriving.read_exact(&mut two).unwrap();
        assert!(arriving.finish().is_err());
    }

    #[test]
    fn a_reader_that_stopped_does_not_hold_up_the_writer() {
        let (mut tee, arriving) = tee(7);
        drop(arriving);
        for _ in 0..PIECES_AHEAD * 2 {
            tee.piece(Bytes::from_static(b"piece"));
        }
        tee.durable();
    }
}
