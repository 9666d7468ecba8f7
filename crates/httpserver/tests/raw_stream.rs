//! Issue 42 point 5: the raw view streams a file from one shared copy. Twenty clients on
//! real HTTP (127.0.0.1) that ask for a 31 MB file, read a few bytes and stall hold one copy
//! of it between them, not one each; a client that reads to the end gets the exact bytes
//! with the raw view's headers.

mod sitecommon;

use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REPO: &str = "acme/raw";
const BIG: &str = "data/big.txt";
const MIB: u64 = 1024 * 1024;

/// This process's resident set, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// Sends a raw request for `path` and reads until `want` bytes of the answer arrived.
async fn stalled(base: &str, path: &str, want: usize) -> (tokio::net::TcpStream, Vec<u8>) {
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request =
        format!("GET /sourcegraph/repos/{REPO}/-/raw/main/{path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut got = vec![0; want];
    let mut filled = 0;
    while filled < want {
        let n = stream.read(&mut got[filled..]).await.expect("read");
        assert!(
            n > 0,
            "the server closed early: {:?}",
            String::from_utf8_lossy(&got)
        );
        filled += n;
    }
    (stream, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue42_stalled_raw_clients_share_one_copy() {
    tokio::time::timeout(Duration::from_secs(240), async {
        let text: String = (0..590_000u32)
            .map(|n| format!("{n:08} the quick brown fox jumps over the lazy dog\n"))
            .collect();
        assert!(text.len() as u64 > 31_000_000 && (text.len() as u64) < 32 * MIB);
        let source = SourceRepo::with_files(&[(BIG, text.as_bytes())]);
        let store = source.store(REPO, "");
        let users = std::sync::Arc::new(access::AccessStore::open(&store.metadata_path()).unwrap());
        let config = ServiceConfig {
            // All twenty downloads at once: none is refused as busy.
            heavy_calls: 64,
            ..ServiceConfig::default()
        };
        let service = Service::new(store.clone(), config);
        let base = sitecommon::serve_site(service, users).await;

        let before = rss();
        let mut clients = Vec::new();
        for _ in 0..20 {
            let (stream, head) = stalled(&base, BIG, 4096).await;
            let head = String::from_utf8_lossy(&head);
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            clients.push(stream);
        }
        // Let the server fill what the connections take and settle.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let held = rss().saturating_sub(before);
        assert!(
            held <= 256 * MIB,
            "20 stalled downloads of a {} MiB file hold {} MiB",
            text.len() as u64 / MIB,
            held / MIB
        );
        assert_eq!(store.blob_decodes(), 1, "one decode for 20 downloads");
        drop(clients);

        // Read to the end: the exact bytes, with the raw view's headers.
        let response = reqwest::get(format!("{base}/sourcegraph/repos/{REPO}/-/raw/main/{BIG}"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        assert_eq!(header("content-type"), "text/plain; charset=utf-8");
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert_eq!(header("content-security-policy"), "sandbox");
        assert_eq!(header("content-length"), text.len().to_string());
        let body = response.bytes().await.unwrap();
        assert!(body == text.as_bytes(), "the exact bytes");
    })
    .await
    .expect("the test finished within 240 s");
}
