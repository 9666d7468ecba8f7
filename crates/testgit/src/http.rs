//! A remote for tests: the repository's `.git` directory served over Git's "dumb" HTTP
//! protocol (plain files) on 127.0.0.1, so a test can register an `http://` source without
//! any network beyond loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

/// Serves a directory read-only over HTTP/1.1 GET until dropped.
pub struct DumbHttp {
    url: String,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl DumbHttp {
    /// Serves `git_dir` (run `git update-server-info` in it first).
    pub fn serve(git_dir: &Path) -> DumbHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let stop = Arc::new(AtomicBool::new(false));
        let root = git_dir.to_path_buf();
        let stopping = stop.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let root = root.clone();
                    thread::spawn(move || answer(stream, &root));
                }
            }
        });
        DumbHttp {
            url: format!("http://{addr}/"),
            stop,
            addr,
        }
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for DumbHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn answer(stream: TcpStream, root: &Path) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header.trim() != "" {
        header.clear();
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/");
    let file = local_file(root, path).and_then(|f| std::fs::read(f).ok());
    let mut stream = stream;
    let _ = match file {
        Some(body) => write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .and_then(|()| stream.write_all(&body)),
        None => stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
    };
}

/// The file under `root` that `path` names, never outside it.
fn local_file(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = Path::new(path.trim_start_matches('/'));
    relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| root.join(relative))
        .filter(|file| file.is_file())
}
