//! How the client writes pipelined requests, seen from a server of our own
//! that answers every request with NoNode.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

use bytes::{Buf as _, Bytes, BytesMut};
use client::{Client, ConnectOptions};
use jute::{encode_frame, ConnectResponse, Record, ReplyHeader};

const CALLERS: usize = 16;
const ROUNDS: usize = 50;
const NO_NODE: i32 = -101;

/// Callers woken by one batch of answers each queue their next request;
/// those requests reach the server in a few writes, not one write each
/// (as they did when the writer ran as soon as the first caller queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_callers_woken_together_share_writes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || answer_in_rounds(listener));
    let client = Client::connect(&address.to_string(), ConnectOptions::new())
        .await
        .unwrap();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    assert_eq!(client.exists("/a").await.unwrap(), None);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let writes = server.join().unwrap();
    let requests = CALLERS * ROUNDS;
    assert!(
        writes * 4 <= requests,
        "{requests} requests came in {writes} writes"
    );
}

/// Answers the connect request, then each round of `CALLERS` requests in
/// one write; returns how many writes (TCP segments with data) the
/// requests came in.
fn answer_in_rounds(listener: TcpListener) -> usize {
    let (mut socket, _) = listener.accept().unwrap();
    let mut pending = BytesMut::new();
    read_frames(&mut socket, &mut pending, 1);
    socket.write_all(&connect_response()).unwrap();
    let segments_before = data_segments_received(&socket);
    for _ in 0..ROUNDS {
        let xids = read_frames(&mut socket, &mut pending, CALLERS);
        socket.write_all(&no_node_replies(&xids)).unwrap();
    }
    (data_segments_received(&socket) - segments_before) as usize
}

/// Reads until `count` whole frames have come, and returns their xids
/// (the connect request's first field is not one, and is ignored).
fn read_frames(socket: &mut TcpStream, pending: &mut BytesMut, count: usize) -> Vec<i32> {
    let mut xids = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while xids.len() < count {
        if let Some(frame) = take_frame(pending) {
            xids.push(frame.clone().get_i32());
            continue;
        }
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "the client closed the connection");
        pending.extend_from_slice(&buf[..n]);
    }
    xids
}

fn take_frame(pending: &mut BytesMut) -> Option<Bytes> {
    let len = usize::try_from(i32::from_be_bytes(pending.get(..4)?.try_into().ok()?)).ok()?;
    if pending.len() < 4 + len {
        return None;
    }
    pending.advance(4);
    Some(pending.split_to(len).freeze())
}

/// `tcpi_data_segs_in` of the socket's `TCP_INFO` (Linux 4.6 and later):
/// the segments with data it received. The libc crate's `tcp_info` stops
/// before it; the kernel only ever appends to the struct, so its offset
/// is fixed.
fn data_segments_received(socket: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd as _;
    const DATA_SEGS_IN_OFFSET: usize = 152;
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the descriptor is the socket's own and open; the buffer and
    // its length are valid for the kernel to write up to `len` bytes.
    let result = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
    assert!(
        len as usize >= DATA_SEGS_IN_OFFSET + 4,
        "TCP_INFO too short"
    );
    u32::from_ne_bytes(
        info[DATA_SEGS_IN_OFFSET..DATA_SEGS_IN_OFFSET + 4]
            .try_into()
            .unwrap(),
    )
}

fn connect_response() -> BytesMut {
    let mut out = BytesMut::new();
    encode_frame(&mut out, |buf| {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 30_000,
            session_id: 1,
            password: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
        }
        .encode(buf)
    });
    out
}

fn no_node_replies(xids: &[i32]) -> BytesMut {
    let mut out = BytesMut::new();
    for &xid in xids {
        encode_frame(&mut out, |buf| {
            ReplyHeader {
                xid,
                zxid: 1,
                err: NO_NODE,
            }
            .encode(buf)
        });
    }
    out
}
