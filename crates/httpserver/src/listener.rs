//! The listener: one accept loop hands each connection to the least-loaded of a few worker
//! threads, and each worker serves its connections to the end on a single-threaded runtime.
//!
//! Why not one multi-thread runtime: a request on a keep-alive connection then often wakes a
//! second worker thread (the I/O readiness lands on one, the connection's task is found or
//! stolen by another), and on this product's small reads that hand-off cost more than the
//! HTTP itself — measured with `bench/read` on moby, the JSON API cost 1.08–1.19× the server
//! CPU of MCP over stdio and MCP over HTTP 1.34–1.41×, against 0.85× and 1.06× with one worker
//! (issue 30 point 6). A connection pinned to one thread costs one wake-up per request, as a
//! pipe does. Work that is not cheap still leaves the worker for the blocking pool
//! (`service`), so a slow read does not hold up the other connections of its worker for long.
//!
//! The load a worker carries is its number of open connections; a new connection goes to the
//! worker with the fewest (ties in turn), so a burst of keep-alive clients spreads evenly.

use axum::Router;
use axum::serve::ListenerExt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (O-6). Connections are served by as many worker threads as the calling runtime has workers.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    let count = tokio::runtime::Handle::current()
        .metrics()
        .num_workers()
        .max(1);
    let stop = CancellationToken::new();
    // Dropping this future (a caller that stops waiting) stops the workers too.
    let _stop_on_drop = stop.clone().drop_guard();
    let workers = (0..count)
        .map(|index| Worker::start(index, local, app.clone(), stop.clone()))
        .collect::<io::Result<Vec<_>>>()?;
    let mut next = 0;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
        };
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "cannot hand over an accepted connection");
                continue;
            }
        };
        let worker = least_loaded(&workers, next);
        next = (worker + 1) % workers.len();
        workers[worker].hand_over(stream, peer);
    }
    drop(listener);
    stop.cancel();
    let mut result = Ok(());
    for worker in workers {
        if let Err(error) = worker.finish().await {
            result = Err(error);
        }
    }
    result
}

/// The worker with the fewest open connections, the first such from `start` on.
fn least_loaded(workers: &[Worker], start: usize) -> usize {
    (0..workers.len())
        .map(|offset| (start + offset) % workers.len())
        .min_by_key(|&index| workers[index].load.load(Ordering::Relaxed))
        .unwrap_or(0)
}

/// What axum does with an accept error: a connection that failed before it was accepted is
/// skipped; anything else (out of file descriptors) waits a second rather than spin.
async fn accept_failed(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// One worker thread: its connection queue, its load and how it ended.
struct Worker {
    queue: mpsc::UnboundedSender<(std::net::TcpStream, SocketAddr)>,
    load: Arc<AtomicUsize>,
    finished: oneshot::Receiver<io::Result<()>>,
}

impl Worker {
    fn start(
        index: usize,
        local: SocketAddr,
        app: Router,
        stop: CancellationToken,
    ) -> io::Result<Self> {
        // Built here, not on the thread, so a runtime that cannot start fails the call.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (queue, incoming) = mpsc::unbounded_channel();
        let load = Arc::new(AtomicUsize::new(0));
        let (done, finished) = oneshot::channel();
        let listener = Handed {
            incoming,
            load: load.clone(),
            local,
        };
        std::thread::Builder::new()
            .name(format!("csg-http-{index}"))
            .spawn(move || {
                let served = runtime.block_on(async move {
                    // `tap_io` only to get axum's `ConnectInfo<SocketAddr>` for this listener.
                    let listener = listener.tap_io(|_| {});
                    axum::serve(
                        listener,
                        app.into_make_service_with_connect_info::<SocketAddr>(),
                    )
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
                });
                let _ = done.send(served);
            })?;
        Ok(Self {
            queue,
            load,
            finished,
        })
    }

    fn hand_over(&self, stream: std::net::TcpStream, peer: SocketAddr) {
        self.load.fetch_add(1, Ordering::Relaxed);
        if self.queue.send((stream, peer)).is_err() {
            // The worker has stopped (shutting down): the connection is closed unanswered.
            self.load.fetch_sub(1, Ordering::Relaxed);
        }
    }

    async fn finish(self) -> io::Result<()> {
        drop(self.queue);
        self.finished.await.unwrap_or_else(|_| {
            Err(io::Error::other(
                "an HTTP worker thread stopped unexpectedly; see the server log",
            ))
        })
    }
}

/// A worker's side of the hand-over: axum accepts from it.
struct Handed {
    incoming: mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr)>,
    load: Arc<AtomicUsize>,
    local: SocketAddr,
}

impl axum::serve::Listener for Handed {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            let Some((stream, peer)) = self.incoming.recv().await else {
                // The accept loop is gone; the stop token ends this worker.
                return std::future::pending().await;
            };
            // Taken first: a connection that cannot be registered gives its load back too.
            let open = Open(self.load.clone());
            match TcpStream::from_std(stream) {
                Ok(stream) => {
                    return (
                        Counted {
                            stream,
                            _open: open,
                        },
                        peer,
                    );
                }
                Err(error) => tracing::debug!(%peer, %error, "cannot take over a connection"),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// A connection, registered with its worker's reactor, that counts toward the worker's load
/// while it is open.
struct Counted {
    stream: TcpStream,
    _open: Open,
}

/// One unit of a worker's load, given back when dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
