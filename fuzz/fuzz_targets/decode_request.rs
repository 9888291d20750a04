//! Feeds arbitrary bytes through everything the server does with a client's
//! byte stream before any state is touched: four-letter-word detection,
//! framing, the connect request, request headers and request bodies.
//!
//! Beyond "never panics", each value that decodes must survive an encode and
//! decode unchanged, so a quirk in one direction cannot hide behind the other.
#![no_main]

use bytes::BytesMut;
use jute::{
    decode_frame, four_letter_word, ConnectRequest, CreateMode, MultiOp, Packet, Reader, Record,
    Request, RequestHeader, DEFAULT_MAX_FRAME_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(first4) = data.first_chunk::<4>() {
        let _ = four_letter_word(*first4);
    }

    let mut buf = BytesMut::from(data);
    let mut first = true;
    while let Ok(Some(frame)) = decode_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES) {
        // The first frame of a connection is the handshake; try every frame
        // both ways so the fuzzer need not find the handshake first.
        if first {
            first = false;
            if let Ok(connect) = ConnectRequest::from_bytes(frame.clone()) {
                assert_eq!(ConnectRequest::from_bytes(connect.to_bytes()), Ok(connect));
            }
        }

        let mut r = Reader::new(frame);
        let Ok(header) = RequestHeader::decode(&mut r) else {
            continue;
        };
        let Ok(packet) = Packet::decode(header.op, &mut r) else {
            continue;
        };
        let mut body = BytesMut::new();
        packet.encode(&mut body);
        let again = Packet::decode(packet.op_code(), &mut Reader::new(body.freeze()));
        if reencodes_unchanged(&packet) {
            assert_eq!(again, Ok(packet));
        }
    }
});

/// ZooKeeper's multi decoder turns a `createTTL` with invalid flags into a
/// plain create that keeps them (for the server to reject with
/// BadArguments); a plain create with invalid flags does not decode, so that
/// one case cannot round-trip.
fn reencodes_unchanged(packet: &Packet) -> bool {
    match packet {
        Packet::Request(Request::Multi(ops)) => ops.iter().all(|op| match op {
            MultiOp::Create { req, .. } => CreateMode::from_flags(req.flags).is_some(),
            _ => true,
        }),
        _ => true,
    }
}
