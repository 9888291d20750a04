//! Framing on the client port: every message in both directions is a
//! big-endian `i32` length and that many bytes. The length is the one number
//! a peer controls before we have buffered anything, so it is checked
//! against the limit before any memory is committed to it.
//!
//! The first four bytes of a connection may instead be a four-letter word
//! (`ruok`, `stat`, ...), which ZooKeeper recognises by reading the length
//! as text; [`four_letter_word`] is that test.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::codec::{jute_len, Record};
use crate::opcode::xid;
use crate::session::{ReplyHeader, WatcherEvent};

/// ZooKeeper's default `jute.maxbuffer`: the largest frame it accepts.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 0xfffff;

/// A frame length no ZooKeeper server would accept. Like ZooKeeper's "Len
/// error" it ends the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "Len error: frame of advertised length {length} is malformed or larger than \
     the limit of {max} bytes (jute.maxbuffer)"
)]
pub struct FrameError {
    /// The length as the peer sent it.
    pub length: i32,
    pub max: usize,
}

/// Takes one whole frame off the front of `buf` and returns its body,
/// sharing `buf`'s memory.
///
/// `Ok(None)` means more bytes are needed; `buf` is left untouched and is
/// not grown here, so a peer that announces a large frame and then stalls
/// costs only what it actually sent.
pub fn decode_frame(
    buf: &mut BytesMut,
    max_frame_bytes: usize,
) -> Result<Option<Bytes>, FrameError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let length = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let error = FrameError {
        length,
        max: max_frame_bytes,
    };
    let len = usize::try_from(length).map_err(|_| error)?;
    if len > max_frame_bytes {
        return Err(error);
    }
    // `len` is at most i32::MAX, so this cannot overflow even on 32 bits.
    let total = 4 + len;
    if buf.len() < total {
        return Ok(None);
    }
    let mut frame = buf.split_to(total);
    frame.advance(4);
    Ok(Some(frame.freeze()))
}

/// Appends one frame whose body `body` writes. The length is patched in
/// afterwards so records need not know their size up front.
pub fn encode_frame(buf: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = buf.len();
    buf.put_i32(0);
    body(buf);
    let len = jute_len(buf.len() - start - 4);
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Appends a whole reply frame: the header, then the body if there is one.
pub fn encode_reply(buf: &mut BytesMut, header: &ReplyHeader, body: Option<&impl Record>) {
    encode_frame(buf, |buf| {
        header.encode(buf);
        if let Some(body) = body {
            body.encode(buf);
        }
    });
}

/// Appends a reply frame with no body: failed operations, pings, auth,
/// `setWatches`, `closeSession` and the like. Saves naming a body type for
/// `None` in [`encode_reply`].
pub fn encode_reply_header(buf: &mut BytesMut, header: &ReplyHeader) {
    encode_frame(buf, |buf| header.encode(buf));
}

/// Appends a watch notification: xid -1, the zxid of the change that fired
/// it (-1 when there is none, e.g. for state changes) and err 0.
pub fn encode_watcher_event(buf: &mut BytesMut, zxid: i64, event: &WatcherEvent) {
    let header = ReplyHeader {
        xid: xid::NOTIFICATION,
        zxid,
        err: 0,
    };
    encode_reply(buf, &header, Some(event));
}

/// The four-letter words ZooKeeper 3.9 knows (`FourLetterCommands`). Which
/// ones run is a separate whitelist decision; unknown or disabled words
/// still stop being a length once recognised here.
pub const FOUR_LETTER_WORDS: [&str; 18] = [
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat",
    "wchc", "wchp", "wchs", "mntr", "isro", "hash",
];

/// Telnet's "interrupt process" sequence (IAC IP IAC DO), which ZooKeeper
/// also registers as a known command, named "telnet close", so that
/// ctrl-C in a telnet session is not read as a 4 GB frame.
pub const TELNET_CLOSE: [u8; 4] = [0xff, 0xf4, 0xff, 0xfd];

/// Recognises a four-letter word in the first four bytes of a connection.
///
/// Only meaningful before the connect request: ZooKeeper checks this only
/// while the connection is uninitialised. Matching is exact and
/// case-sensitive, as ZooKeeper compares the bytes as an integer. `stmk` is
/// followed by an 8-byte trace mask the caller must read.
pub fn four_letter_word(first4: [u8; 4]) -> Option<&'static str> {
    if first4 == TELNET_CLOSE {
        return Some("telnet close");
    }
    FOUR_LETTER_WORDS
        .iter()
        .copied()
        .find(|word| word.as_bytes() == first4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Reader;
    use crate::responses::GetAllChildrenNumberResponse;
    use proptest::prelude::*;

    #[test]
    fn waits_for_prefix_and_body() {
        let mut buf = BytesMut::from(&[0, 0, 0][..]);
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
        buf.extend_from_slice(&[3, b'a', b'b']);
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
        assert_eq!(buf.len(), 6);
        buf.extend_from_slice(b"cNEXT");
        assert_eq!(
            decode_frame(&mut buf, 100),
            Ok(Some(Bytes::from_static(b"abc")))
        );
        assert_eq!(&buf[..], b"NEXT");
    }

    #[test]
    fn empty_frame() {
        let mut buf = BytesMut::from(&[0, 0, 0, 0][..]);
        assert_eq!(decode_frame(&mut buf, 0), Ok(Some(Bytes::new())));
        assert!(buf.is_empty());
    }

    #[test]
    fn negative_and_oversized_lengths_are_errors() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(
            decode_frame(&mut buf, 100),
            Err(FrameError {
                length: -1,
                max: 100
            })
        );
        let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
        let err = decode_frame(&mut buf, 100).unwrap_err();
        assert_eq!(err.length, 101);
        assert!(err.to_string().contains("Len error"));
        // Exactly the limit is allowed.
        let mut buf = BytesMut::from(&100i32.to_be_bytes()[..]);
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
    }

    #[test]
    fn does_not_reserve_for_announced_length() {
        let mut buf = BytesMut::with_capacity(8);
        buf.extend_from_slice(&(DEFAULT_MAX_FRAME_BYTES as i32).to_be_bytes());
        let before = buf.capacity();
        assert_eq!(decode_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES), Ok(None));
        assert_eq!(buf.capacity(), before);
    }

    #[test]
    fn reply_frame_layout() {
        let mut buf = BytesMut::new();
        let header = ReplyHeader {
            xid: 7,
            zxid: 0x1_0000_0002,
            err: 0,
        };
        encode_reply(
            &mut buf,
            &header,
            Some(&GetAllChildrenNumberResponse { total_number: 5 }),
        );
        let expected: &[u8] = &[
            0, 0, 0, 20, // length
            0, 0, 0, 7, // xid
            0, 0, 0, 1, 0, 0, 0, 2, // zxid
            0, 0, 0, 0, // err
            0, 0, 0, 5, // totalNumber
        ];
        assert_eq!(&buf[..], expected);

        let mut buf = BytesMut::new();
        encode_reply_header(&mut buf, &header);
        assert_eq!(&buf[..4], &[0, 0, 0, 16]);
        assert_eq!(buf.len(), 20);
    }

    #[test]
    fn watcher_event_frame() {
        let mut buf = BytesMut::from(&b"prev"[..]);
        let event = WatcherEvent {
            event_type: 1,
            state: 3,
            path: "/x".into(),
        };
        encode_watcher_event(&mut buf, 9, &event);
        let mut tail = buf.split_off(4);
        let body = decode_frame(&mut tail, 100).unwrap().unwrap();
        let mut r = Reader::new(body);
        assert_eq!(
            ReplyHeader::decode(&mut r).unwrap(),
            ReplyHeader {
                xid: -1,
                zxid: 9,
                err: 0
            }
        );
        assert_eq!(WatcherEvent::decode(&mut r).unwrap(), event);
        assert!(r.is_empty());
    }

    #[test]
    fn four_letter_words() {
        for word in FOUR_LETTER_WORDS {
            let bytes: [u8; 4] = word.as_bytes().try_into().unwrap();
            assert_eq!(four_letter_word(bytes), Some(word));
        }
        assert_eq!(four_letter_word(*b"RUOK"), None);
        assert_eq!(four_letter_word(*b"kill"), None);
        assert_eq!(four_letter_word([0, 0, 0, 45]), None);
        assert_eq!(four_letter_word(TELNET_CLOSE), Some("telnet close"));
    }

    proptest! {
        #[test]
        fn frames_round_trip(bodies in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..64), 0..8)
        ) {
            let mut buf = BytesMut::new();
            for body in &bodies {
                encode_frame(&mut buf, |b| b.extend_from_slice(body));
            }
            for body in &bodies {
                let frame = decode_frame(&mut buf, 64).unwrap().unwrap();
                prop_assert_eq!(&frame[..], &body[..]);
            }
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), max in 0usize..128) {
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = decode_frame(&mut buf, max) {}
        }
    }
}
