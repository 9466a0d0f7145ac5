//! What a refused upload leaves behind: a body answered 413 or 503 before it was read whole is not kept on a
//! connection waiting for a next request — the connection is closed, so the socket and the kernel's buffers go with
//! the sender. A body read whole keeps its connection for the next request.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

const LIMITS: &str = "server: {listen: \"127.0.0.1:0\", max_body_bytes: 65536, max_inflight_body_bytes: 65536}";

/// The head of a POST of an Argo CD body, with `framing` (`Content-Length: N` or `Transfer-Encoding: chunked`).
fn head(framing: &str) -> Vec<u8> {
    format!("POST /v1/argocd/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}\r\n\r\n")
        .into_bytes()
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.address.trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// Reads one answer's head; its status.
async fn status(conn: &mut TcpStream) -> u16 {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(15), conn.read(&mut byte))
            .await
            .expect("an answer within 15 s")
            .expect("read");
        assert_eq!(
            n,
            1,
            "the connection closed before an answer: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{text}"))
}

/// Whether Herald closed the connection (end of stream or reset) within 15 s, reading past the answer's body (it
/// may wait for the sender to stop, up to actix-web's `client_disconnect_timeout`).
async fn closed(conn: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn a_chunked_upload_refused_as_too_large_closes_its_connection() {
    let app = TestApp::spawn(LIMITS).await;
    let mut conn = connect(&app).await;
    let chunk = vec![b'x'; 32 * 1024];
    let mut request = head("Transfer-Encoding: chunked");
    for _ in 0..4 {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(&chunk);
        request.extend_from_slice(b"\r\n");
    }
    // The sender stops half-way (no last chunk), as a client that gave up would.
    conn.write_all(&request).await.expect("send");
    assert_eq!(status(&mut conn).await, 413);
    assert!(closed(&mut conn).await, "the connection of a refused upload is closed");
    app.stop().await;
}

#[tokio::test]
async fn a_body_declared_too_large_is_refused_unread_and_its_connection_closed() {
    let app = TestApp::spawn(LIMITS).await;
    let mut conn = connect(&app).await;
    conn.write_all(&[head("Content-Length: 7000000"), b"{\"app\":".to_vec()].concat())
        .await
        .expect("send");
    assert_eq!(status(&mut conn).await, 413);
    assert!(closed(&mut conn).await);
    app.stop().await;
}

#[tokio::test]
async fn an_upload_that_does_not_arrive_in_time_is_answered_408_and_its_connection_closed() {
    let app = TestApp::spawn(
        "server: {listen: \"127.0.0.1:0\", max_body_bytes: 65536, max_inflight_body_bytes: 65536, \
         body_read_timeout: 1s}",
    )
    .await;
    let mut conn = connect(&app).await;
    conn.write_all(&[head("Content-Length: 60000"), b"{\"app\":".to_vec()].concat())
        .await
        .expect("send");
    assert_eq!(status(&mut conn).await, 408);
    assert!(closed(&mut conn).await, "the timed-out upload's connection is closed");
    app.stop().await;
}

#[tokio::test]
async fn a_connection_whose_body_was_read_whole_serves_the_next_request() {
    let app = TestApp::spawn(LIMITS).await;
    let mut conn = connect(&app).await;
    for answer in [202, 422] {
        let body = if answer == 202 {
            envelope("payments-api", "payments", "Synced", "Healthy", "2026-03-02T09:00:00Z")
        } else {
            "{\"app\": 3}".to_string()
        };
        let request = [head(&format!("Content-Length: {}", body.len())), body.into_bytes()].concat();
        conn.write_all(&request).await.expect("send");
        let got = status(&mut conn).await;
        assert_eq!(got, answer);
        if got == 422 {
            // Read whole, refused for what it says: closed too (an error answer to a body), never left half-read.
            assert!(closed(&mut conn).await);
        } else {
            let mut rest = [0u8; 4096];
            let n = conn.read(&mut rest).await.expect("the answer's body");
            assert!(n > 0);
        }
    }
    app.stop().await;
}
