//! SASL DIGEST-MD5 on a new connection, after the handshake and before any
//! request. ZooKeeper's client sends nothing else while its SASL exchange
//! is in progress, so the exchange owns the socket until it ends, and the
//! credentials and watches replayed after it carry the `sasl` identity.

use bytes::BytesMut;
use jute::{encode_frame, ErrorCode, GetSASLRequest, OpCode, Record, ReplyHeader, RequestHeader};
use sasl::ClientExchange;
use tokio::io::AsyncWriteExt;

use crate::options::SaslLogin;
use crate::session::{read_frame, Attempt};
use tls::MaybeTls;

/// Runs the exchange on `stream`, whose unread input is in `buf`; `xids`
/// numbers the packets. Ends in `Attempt::SaslFailed` when the server
/// refuses us or we refuse the server, as both end ZooKeeper's client.
pub(crate) async fn authenticate(
    stream: &mut MaybeTls,
    buf: &mut BytesMut,
    login: &SaslLogin,
    mut xids: impl FnMut() -> i32,
    max_frame_bytes: usize,
) -> Result<(), Attempt> {
    let mut exchange = ClientExchange::new(&login.user, &login.password);
    let mut token = ClientExchange::INITIAL.to_vec();
    loop {
        let xid = xids();
        send(stream, xid, token).await?;
        let reply = receive(stream, buf, xid, max_frame_bytes).await?;
        match exchange.respond(&reply).map_err(Attempt::SaslFailed)? {
            Some(next) => token = next,
            None => return Ok(()),
        }
    }
}

async fn send(stream: &mut MaybeTls, xid: i32, token: Vec<u8>) -> Result<(), Attempt> {
    let mut out = BytesMut::new();
    encode_frame(&mut out, |buf| {
        RequestHeader {
            xid,
            op: OpCode::Sasl.code(),
        }
        .encode(buf);
        GetSASLRequest {
            token: Some(token.into()),
        }
        .encode(buf);
    });
    stream
        .write_all(&out)
        .await
        .map_err(|e| Attempt::Failed(format!("sending a SASL token failed: {e}")))
}

/// The server's token in answer to packet `xid`.
async fn receive(
    stream: &mut MaybeTls,
    buf: &mut BytesMut,
    xid: i32,
    max_frame_bytes: usize,
) -> Result<Vec<u8>, Attempt> {
    let frame = read_frame(stream, buf, max_frame_bytes)
        .await
        .map_err(|why| Attempt::Failed(format!("during SASL authentication: {why}")))?;
    let bad = |e: &dyn std::fmt::Display| Attempt::Failed(format!("bad SASL reply: {e}"));
    let mut reader = jute::Reader::new(frame);
    let header = ReplyHeader::decode(&mut reader).map_err(|e| bad(&e))?;
    if header.xid != xid {
        return Err(bad(&format!("xid {} answering xid {xid}", header.xid)));
    }
    if header.err == ErrorCode::AuthFailed.code() {
        return Err(Attempt::SaslFailed(
            "the server refused the user or password".into(),
        ));
    }
    if header.err != 0 {
        return Err(bad(&format!("error code {}", header.err)));
    }
    let response = jute::SetSASLResponse::decode(&mut reader).map_err(|e| bad(&e))?;
    response.token.map(|t| t.to_vec()).ok_or_else(|| {
        Attempt::SaslFailed(
            "the server offers no SASL (give it a JAAS file with a Server section)".into(),
        )
    })
}
