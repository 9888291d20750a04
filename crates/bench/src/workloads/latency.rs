//! `latency`: one synchronous client creates, reads, overwrites and
//! deletes N znodes, one request at a time — the latency of a single
//! request with nothing queued before it (the ZooKeeper paper's latency
//! table, and the latency CDF of the ConCoord comparison). Beside them,
//! the floors under them measured in the same run: the data disk's own
//! fdatasync time under a durable write, a loopback round trip between
//! two threads that do nothing else under every answer, and the two
//! together under every durable write's answer.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use client::CreateMode;

use crate::deploy::{CpuClock, Deployment};
use crate::load;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct LatencyArgs {
    /// Requests of each kind.
    #[arg(long, default_value_t = 10_000)]
    pub ops: usize,
    /// Bytes of data per create and set.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
}

impl LatencyArgs {
    pub fn flags(&self) -> String {
        format!("--ops {} --value-size {}", self.ops, self.value_size)
    }
}

const KINDS: [&str; 4] = ["create", "get", "set", "delete"];

pub async fn run(args: &LatencyArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("latency", deployment.label(), String::new());
    m.setting("requests of each kind", args.ops);
    m.setting("value bytes", args.value_size);
    let connect = deployment.connect_string().to_string();
    let cpu = deployment.cpu_clock();
    let timed = args.clone();
    m.rows = tokio::task::spawn_blocking(move || time_requests(&connect, &cpu, &timed))
        .await
        .context("the synchronous client's thread panicked")??;
    m.notes.push(
        "the client: one session on a thread with an async runtime of its own, sending each \
         request once the one before is answered"
            .into(),
    );
    let answer_bytes = args.value_size + GET_DATA_ANSWER_OVERHEAD_BYTES;
    let count = args.ops.min(10_000);
    let round_trips = tokio::task::block_in_place(|| time_loopback(count, answer_bytes, None))
        .context("timing loopback round trips")?;
    m.rows.push(Row::new("loopback").latencies(&round_trips));
    m.notes.push(format!(
        "loopback: a {LOOPBACK_REQUEST_BYTES}-byte request answered with {answer_bytes} bytes \
         (a getData of this run's values) over loopback TCP, by a thread that does nothing \
         else: the least any server answers a read in on this machine"
    ));
    if let Some(dir) = deployment.data_dir() {
        let count = args.ops.min(1000);
        for (row, within) in [
            ("fdatasync", Within::Written),
            ("fdatasync appended", Within::Appended),
        ] {
            let syncs = tokio::task::block_in_place(|| time_fdatasync(&dir, count, within))
                .with_context(|| format!("timing fdatasync in {}", dir.display()))?;
            m.rows.push(Row::new(row).latencies(&syncs));
        }
        m.notes.push(format!(
            "fdatasync: {SYNC_BYTES} bytes written then fdatasync'ed, one at a time, in the \
             servers' data directory, over blocks written before (as a log that preallocates \
             its files writes): what every durable write waits for at least; fdatasync \
             appended: the same records appended, which changes the file's size and so syncs \
             its metadata too"
        ));
        let answered = tokio::task::block_in_place(|| {
            let log = written_file(&dir, count)?;
            time_loopback(count, SET_DATA_ANSWER_BYTES, Some(log))
        })
        .with_context(|| format!("timing durable loopback round trips in {}", dir.display()))?;
        m.rows
            .push(Row::new("durable loopback").latencies(&answered));
        m.notes.push(format!(
            "durable loopback: the loopback round trip, its thread writing and fdatasync'ing \
             a {SYNC_BYTES}-byte record (as the fdatasync row) before each \
             {SET_DATA_ANSWER_BYTES}-byte answer: the least any server answers a durable \
             write in on this machine"
        ));
    }
    Ok(m)
}

/// The timed requests, from one thread that waits for each answer before
/// it sends the next request, woken by the network alone: a runtime of its
/// own on this thread, so that no other thread relays a request or an
/// answer (on the shared runtime each one crossed threads four times,
/// which the server's latency would be charged for).
fn time_requests(connect: &str, cpu: &CpuClock, args: &LatencyArgs) -> anyhow::Result<Vec<Row>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the synchronous client's runtime")?;
    runtime.block_on(async {
        let clients = load::connect(connect, 1).await?;
        let zk = &clients[0];
        client::recipes::ensure_path(zk, "/bench/latency").await?;
        let value = vec![b'x'; args.value_size];
        let paths: Vec<String> = (0..args.ops)
            .map(|i| format!("/bench/latency/n{i:08}"))
            .collect();
        let mut rows = Vec::new();
        for kind in KINDS {
            eprintln!("  {kind} x {}", args.ops);
            let mut latencies = Latencies::default();
            let began = Instant::now();
            let spending = cpu.start();
            for path in &paths {
                let started = Instant::now();
                match kind {
                    "create" => zk
                        .create(path, &value, CreateMode::Persistent)
                        .await
                        .map(drop),
                    "get" => zk.get_data(path).await.map(drop),
                    "set" => zk.set_data(path, &value, None).await.map(drop),
                    _ => zk.delete(path, None).await,
                }
                .with_context(|| format!("{kind} {path}"))?;
                latencies.record(started.elapsed());
            }
            rows.push(
                Row::new(kind)
                    .throughput(&latencies, began.elapsed())
                    .cpu_per_op(spending.spent(), latencies.count())
                    .with_cdf(&latencies),
            );
        }
        load::close_all(clients).await;
        Ok(rows)
    })
}

/// The bytes written before each timed fdatasync: a small log record.
const SYNC_BYTES: usize = 1024;

/// Where the timed records go.
#[derive(Debug, Clone, Copy)]
enum Within {
    /// Over zeros written and synced first: only the data is synced.
    Written,
    /// Past the file's end: its size, metadata, is synced with the data.
    Appended,
}

fn time_fdatasync(dir: &Path, count: usize, within: Within) -> std::io::Result<Latencies> {
    let mut file = match within {
        Within::Written => written_file(dir, count)?,
        Within::Appended => tempfile::tempfile_in(dir)?,
    };
    let record = vec![b'x'; SYNC_BYTES];
    let mut latencies = Latencies::default();
    for _ in 0..count {
        let started = Instant::now();
        file.write_all(&record)?;
        file.sync_data()?;
        latencies.record(started.elapsed());
    }
    Ok(latencies)
}

/// A temporary file in `dir` of zeros for `records` records, written and
/// synced, positioned at its start.
fn written_file(dir: &Path, records: usize) -> std::io::Result<File> {
    let mut file = tempfile::tempfile_in(dir)?;
    file.write_all(&vec![0; records * SYNC_BYTES])?;
    file.sync_all()?;
    file.rewind()?;
    Ok(file)
}

/// A getData request of a short path, with its frame length.
const LOOPBACK_REQUEST_BYTES: usize = 40;
/// A getData answer's bytes besides the data: frame length, reply header,
/// data length and stat.
const GET_DATA_ANSWER_OVERHEAD_BYTES: usize = 4 + 16 + 4 + 68;

/// A setData answer: frame length, reply header and stat.
const SET_DATA_ANSWER_BYTES: usize = 4 + 16 + 68;

/// Round trips to a blocking echo of fixed-size frames on another thread:
/// both sides woken by the network alone, as a server's reader is. With a
/// `log`, the echo writes a record into it and syncs it before each
/// answer, as a server does before answering a write.
fn time_loopback(
    count: usize,
    answer_bytes: usize,
    log: Option<File>,
) -> std::io::Result<Latencies> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let address = listener.local_addr()?;
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut socket, _) = listener.accept()?;
        socket.set_nodelay(true)?;
        let mut request = [0u8; LOOPBACK_REQUEST_BYTES];
        let answer = vec![0u8; answer_bytes];
        let record = vec![b'x'; SYNC_BYTES];
        let mut log = log;
        while socket.read_exact(&mut request).is_ok() {
            if let Some(log) = &mut log {
                log.write_all(&record)?;
                log.sync_data()?;
            }
            socket.write_all(&answer)?;
        }
        Ok(())
    });
    let mut socket = TcpStream::connect(address)?;
    socket.set_nodelay(true)?;
    let request = [0u8; LOOPBACK_REQUEST_BYTES];
    let mut answer = vec![0u8; answer_bytes];
    let mut latencies = Latencies::default();
    for _ in 0..count {
        let started = Instant::now();
        socket.write_all(&request)?;
        socket.read_exact(&mut answer)?;
        latencies.record(started.elapsed());
    }
    drop(socket);
    server
        .join()
        .map_err(|_| std::io::Error::other("the loopback echo thread panicked"))??;
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_is_timed_once_per_round_trip() {
        let round_trips = super::time_loopback(5, 1116, None).unwrap();
        assert_eq!(round_trips.count(), 5);
    }

    #[test]
    fn durable_loopback_writes_a_record_for_each_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let log = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        let round_trips = super::time_loopback(5, 88, Some(log.reopen().unwrap())).unwrap();
        assert_eq!(round_trips.count(), 5);
        let written = std::fs::read(log.path()).unwrap();
        assert_eq!(written, vec![b'x'; 5 * super::SYNC_BYTES]);
    }

    #[test]
    fn fdatasync_is_timed_once_per_record() {
        let dir = tempfile::tempdir().unwrap();
        for within in [super::Within::Written, super::Within::Appended] {
            let syncs = super::time_fdatasync(dir.path(), 3, within).unwrap();
            assert_eq!(syncs.count(), 3);
        }
        // the files were temporary: nothing is left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
