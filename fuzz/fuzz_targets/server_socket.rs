//! Arbitrary bytes on a socket of a real server: the whole request path
//! (framing, handshake, sessions, the pipeline, the tree, the log) must
//! neither panic nor wedge. One standalone server runs in this process for
//! the whole fuzzing run; each input is one connection, optionally opened
//! with a valid handshake so the fuzzer spends its effort on requests; after
//! each input the server must still answer `srvr` (the one four-letter word
//! the default whitelist allows).
//!
//! A panic in any server thread aborts the process (a panicking tokio task
//! would otherwise be swallowed), which libFuzzer reports as a crash.
#![no_main]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jute::{ConnectRequest, Record};
use libfuzzer_sys::fuzz_target;

fn server() -> SocketAddr {
    static ADDRESS: OnceLock<SocketAddr> = OnceLock::new();
    *ADDRESS.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("{info}");
            std::process::abort();
        }));
        let dir = tempfile::tempdir().expect("a data directory").keep();
        let mut config = server::ServerConfig::default();
        config.client_port = 0;
        config.client_port_address = Some([127, 0, 0, 1].into());
        config.data_dir = dir.clone();
        config.data_log_dir = dir;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime
                .block_on(server::run(
                    config,
                    |addr, _| tx.send(addr).expect("listening"),
                    std::future::pending(),
                ))
                .expect("the server runs");
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server listens");
        // Listening comes before serving: wait until it has elected itself.
        for _ in 0..300 {
            if srvr(addr).starts_with("Zookeeper version:") {
                return addr;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server did not start serving within 30 s");
    })
}

fn handshake() -> Vec<u8> {
    let request = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms: 10_000,
        session_id: 0,
        password: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
    };
    let mut framed = BytesMut::new();
    jute::encode_frame(&mut framed, |buf| request.encode(buf));
    framed.to_vec()
}

fn srvr(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream.write_all(b"srvr").expect("write srvr");
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let addr = server();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
        let mut bytes = if mode & 1 == 1 {
            handshake()
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(rest);
        let _ = stream.write_all(&bytes);
        let mut sink = [0u8; 65536];
        while let Ok(n) = stream.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
    }
    let answer = srvr(addr);
    assert!(
        answer.starts_with("Zookeeper version:"),
        "the server stopped answering: {answer:?}"
    );
});
