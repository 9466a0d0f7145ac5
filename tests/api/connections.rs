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

/// Herald's TCP sockets on `port` that are not its listener: the connections it still holds (/proc/PID/fd's sockets
/// found in /proc/net/tcp and tcp6, any state but LISTEN).
fn held_connections(pid: u32, port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let local = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            cols.len() > 9 && cols[1].ends_with(&local) && cols[3] != "0A" && inodes.contains(cols[9])
        })
        .count()
}

/// One client of a 7 MB chunked upload that gives up: it sends what Herald takes within a second of each write, reads
/// its whole answer if one comes within 10 s, and goes away (a FIN, as a client that exits does).
async fn upload_and_go(address: String) -> Option<u16> {
    let mut conn = TcpStream::connect(address).await.expect("connect");
    let mut request = head("Transfer-Encoding: chunked");
    conn.write_all(&std::mem::take(&mut request)).await.ok()?;
    let chunk = vec![b'x'; 64 * 1024];
    let mut piece = format!("{:x}\r\n", chunk.len()).into_bytes();
    piece.extend_from_slice(&chunk);
    piece.extend_from_slice(b"\r\n");
    for _ in 0..(7 * 1024 * 1024 / chunk.len()) {
        match tokio::time::timeout(Duration::from_secs(1), conn.write_all(&piece)).await {
            Ok(Ok(())) => continue,
            _ => break,
        }
    }
    // The whole answer is read (so the client's close is a FIN, not a reset for unread bytes), then it goes.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut wait = Duration::from_secs(10);
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout(wait, conn.read(&mut buf)).await {
        answer.extend_from_slice(&buf[..n]);
        wait = Duration::from_millis(500);
    }
    let status = (answer.len() > 12)
        .then(|| String::from_utf8_lossy(&answer[9..12]).parse().ok())
        .flatten();
    let _ = conn.shutdown().await;
    drop(conn);
    status
}

/// Thirty clients send 7 MB chunked uploads at once to the real binary (bodies of at most 4 MB, 16 MB read at
/// once): each is refused (413 past the limit, 503 when the budget stays full), and once the clients have gone
/// Herald holds none of their sockets (they stayed ESTABLISHED with a zero window or in CLOSE-WAIT before).
#[tokio::test]
async fn refused_chunked_uploads_leave_no_socket_behind_once_their_clients_are_gone() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("herald.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{listen: \"127.0.0.1:0\"}}\nstorage: {{url: \"sqlite://{}/h.db\"}}\nlog: {{level: warn}}\n",
            dir.path().display()
        ),
    )
    .expect("config");
    let mut bin = Binary::start(&config, &[]);
    let address = bin.address.trim_start_matches("http://").to_string();
    let port: u16 = address.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
    let pid = bin.child.id();
    let uploads = (0..30).map(|_| tokio::spawn(upload_and_go(address.clone())));
    let answers: Vec<Option<u16>> = futures_util::future::join_all(uploads)
        .await
        .into_iter()
        .map(|r| r.expect("client"))
        .collect();
    println!(
        "answers: {answers:?}; connections held when the clients have gone: {}",
        held_connections(pid, port)
    );
    assert!(
        answers.iter().flatten().all(|s| matches!(s, 413 | 503 | 408)),
        "every upload refused: {answers:?}"
    );
    let released = eventually(Duration::from_secs(30), || {
        std::future::ready((held_connections(pid, port) == 0).then_some(()))
    })
    .await;
    assert!(
        released.is_some(),
        "{} connections still held 30 s after their clients went (answers {answers:?})",
        held_connections(pid, port)
    );
    bin.terminate().await;
}
