//! The paths of the reads a connection has already received but not yet
//! answered: one socket read often brings several requests, and loading
//! what their lookups will touch all at once (`DataTree::prefetch`)
//! overlaps their cache misses instead of taking them one read after
//! another, each under the lock every read answer takes.
//!
//! This only peeks at the bytes: a frame cut short, an unknown opcode or a
//! malformed path is skipped here and decoded (and refused) in its turn.
//! A read held behind a write of its session is answered by the apply loop
//! only once the write is applied, a log sync or more later, when what was
//! loaded on its arrival is long gone: the apply loop loads it again with
//! the write's own lookups (`request_path`).

use jute::{OpCode, Request};

/// Frames looked ahead at, at most: enough for a socket read's worth of
/// pipelined requests, and a bound on the work one socket read may cause.
pub const FRAMES_AHEAD_MAX: usize = 32;

/// The paths of the reads among the first whole frames at the start of
/// `input` (each a four-byte length, then the request), in order.
pub fn read_paths(input: &[u8]) -> impl Iterator<Item = &str> {
    frames(input).take(FRAMES_AHEAD_MAX).filter_map(read_path)
}

/// The whole frames at the start of `input`, unframed.
fn frames(mut input: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (length, rest) = take_i32(input)?;
        let frame = rest.get(..usize::try_from(length).ok()?)?;
        input = &rest[frame.len()..];
        Some(frame)
    })
}

/// The path a read request (unframed) starts its body with; `None` for
/// any other request.
pub fn read_path(request: &[u8]) -> Option<&str> {
    let (_xid, rest) = take_i32(request)?;
    let (op, body) = take_i32(rest)?;
    let path_first = matches!(
        OpCode::from_code(op),
        Some(
            OpCode::GetData
                | OpCode::Exists
                | OpCode::GetChildren
                | OpCode::GetChildren2
                | OpCode::GetAcl
                | OpCode::GetAllChildrenNumber
        )
    );
    if !path_first {
        return None;
    }
    let (length, rest) = take_i32(body)?;
    let bytes = rest.get(..usize::try_from(length).ok()?)?;
    std::str::from_utf8(bytes).ok()
}

/// The path a decoded read looks up: the same reads as [`read_path`]'s.
pub fn request_path(request: &Request) -> Option<&str> {
    match request {
        Request::GetData(req)
        | Request::Exists(req)
        | Request::GetChildren(req)
        | Request::GetChildren2(req) => Some(&req.path),
        Request::GetAcl(req) => Some(&req.path),
        Request::GetAllChildrenNumber(req) => Some(&req.path),
        _ => None,
    }
}

fn take_i32(input: &[u8]) -> Option<(i32, &[u8])> {
    let (head, rest) = input.split_first_chunk::<4>()?;
    Some((i32::from_be_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(op: i32, body: &[u8]) -> Vec<u8> {
        let mut request = 7i32.to_be_bytes().to_vec();
        request.extend_from_slice(&op.to_be_bytes());
        request.extend_from_slice(body);
        let mut framed = (request.len() as i32).to_be_bytes().to_vec();
        framed.extend(request);
        framed
    }

    fn path_and_watch(path: &str) -> Vec<u8> {
        let mut body = (path.len() as i32).to_be_bytes().to_vec();
        body.extend_from_slice(path.as_bytes());
        body.push(0);
        body
    }

    #[test]
    fn finds_the_paths_of_whole_read_frames_in_order() {
        let mut input = frame(OpCode::GetData.code(), &path_and_watch("/a"));
        input.extend(frame(OpCode::SetData.code(), &path_and_watch("/written")));
        input.extend(frame(OpCode::Exists.code(), &path_and_watch("/b/c")));
        input.extend(frame(OpCode::GetChildren2.code(), &path_and_watch("/")));
        let cut = frame(OpCode::GetData.code(), &path_and_watch("/cut"));
        input.extend_from_slice(&cut[..cut.len() - 3]);
        assert_eq!(read_paths(&input).collect::<Vec<_>>(), ["/a", "/b/c", "/"]);
    }

    #[test]
    fn skips_what_it_cannot_read() {
        let mut input = frame(OpCode::GetData.code(), &(-1i32).to_be_bytes());
        input.extend(frame(OpCode::GetData.code(), &[0, 0, 0, 2, 0xff, 0xfe]));
        input.extend(frame(OpCode::GetData.code(), &[0, 0, 0, 9, b'/']));
        input.extend(frame(9999, &path_and_watch("/unknown")));
        input.extend(frame(OpCode::GetData.code(), &path_and_watch("/kept")));
        assert_eq!(read_paths(&input).collect::<Vec<_>>(), ["/kept"]);
        // A negative or truncated frame length ends the look ahead.
        assert_eq!(read_paths(&(-4i32).to_be_bytes()).count(), 0);
        assert_eq!(read_paths(&[0, 0]).count(), 0);
    }

    #[test]
    fn a_decoded_read_names_the_path_its_bytes_do() {
        let reads = [
            OpCode::GetData,
            OpCode::Exists,
            OpCode::GetChildren,
            OpCode::GetChildren2,
            OpCode::GetAcl,
            OpCode::GetAllChildrenNumber,
        ];
        for op in reads {
            let request = frame(op.code(), &path_and_watch("/p"));
            let unframed = &request[4..];
            let body = bytes::Bytes::copy_from_slice(&unframed[8..]);
            let packet = jute::Packet::decode(op.code(), &mut jute::Reader::new(body));
            let Ok(jute::Packet::Request(decoded)) = packet else {
                panic!("{op:?} did not decode: {packet:?}");
            };
            assert_eq!(read_path(unframed), Some("/p"), "{op:?}");
            assert_eq!(request_path(&decoded), Some("/p"), "{op:?}");
        }
        let write = Request::Delete(jute::DeleteRequest {
            path: "/p".into(),
            version: -1,
        });
        assert_eq!(request_path(&write), None);
    }

    #[test]
    fn looks_at_a_bounded_number_of_frames() {
        let write = frame(OpCode::SetData.code(), &path_and_watch("/w"));
        let read = frame(OpCode::GetData.code(), &path_and_watch("/r"));
        let mut input = write.repeat(FRAMES_AHEAD_MAX - 1);
        input.extend(read.repeat(2));
        assert_eq!(read_paths(&input).collect::<Vec<_>>(), ["/r"]);
    }
}
