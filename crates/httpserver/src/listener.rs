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
//!
//! A connection from a trusted proxy (`crate::client`) may open with a PROXY protocol header
//! (v1 or v2) naming the client. Its worker reads the first bytes in a task of their own
//! before hyper sees the connection: at most [`PRELUDE_MAX`] bytes within the options'
//! `proxy_header_timeout`, else the connection is closed, so a slow or partial header holds
//! up nothing but itself. Bytes read past the header (the HTTP request) are handed to hyper
//! first. A connection from any other peer is served as it came: a PROXY header from it is
//! not honoured (hyper refuses it as a malformed request).
//!
//! With TLS (`--cluster-tls-cert`, O-10) every connection is TLS: the handshake runs after the
//! PROXY header, if any, in a task of its own like the header, bounded by
//! [`HANDSHAKE_TIMEOUT`]. With mutual TLS a connection whose client certificate chains to the
//! cluster CA carries [`crate::PeerCertified`] in each of its requests.

use crate::client::{self, Connection, PRELUDE_MAX, Prelude, TrustedProxies};
use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::ListenerExt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a TLS handshake may take; then the connection is closed. A replica on the same
/// network needs milliseconds; this bounds a client that opens and stalls.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (O-6). Connections are served by as many worker threads as the calling runtime has workers.
/// Every request carries its [`client::ClientAddr`], told by `trusted`.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    trusted: TrustedProxies,
    proxy_header_timeout: Duration,
    tls: Option<crate::ServerTls>,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    let trusted = Arc::new(trusted);
    // `accepted` runs first: it hands `client::mark` the connection it reads.
    let app = app
        .layer(axum::middleware::from_fn_with_state(
            trusted.clone(),
            client::mark,
        ))
        .layer(axum::middleware::from_fn(accepted));
    let prelude = Arc::new(Preludes {
        trusted,
        timeout: proxy_header_timeout,
        tls: tls.map(|tls| TlsAcceptor::from(tls.0)),
    });
    let count = tokio::runtime::Handle::current()
        .metrics()
        .num_workers()
        .max(1);
    let stop = CancellationToken::new();
    // Dropping this future (a caller that stops waiting) stops the workers too.
    let _stop_on_drop = stop.clone().drop_guard();
    let workers = (0..count)
        .map(|index| Worker::start(index, local, app.clone(), prelude.clone(), stop.clone()))
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
        prelude: Arc<Preludes>,
        stop: CancellationToken,
    ) -> io::Result<Self> {
        // Built here, not on the thread, so a runtime that cannot start fails the call.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (queue, incoming) = mpsc::unbounded_channel();
        let load = Arc::new(AtomicUsize::new(0));
        let (done, finished) = oneshot::channel();
        let (read, prelude_read) = mpsc::unbounded_channel();
        let listener = Handed {
            incoming: Some(incoming),
            load: load.clone(),
            local,
            prelude,
            read,
            prelude_read,
        };
        std::thread::Builder::new()
            .name(format!("csg-http-{index}"))
            .spawn(move || {
                let served = runtime.block_on(async move {
                    // `tap_io` only to get axum's `ConnectInfo<Connection>` for this listener.
                    let listener = listener.tap_io(|_| {});
                    axum::serve(
                        listener,
                        app.into_make_service_with_connect_info::<Accepted>(),
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

/// How connections are opened: who is trusted, how long a PROXY header may take, and the TLS
/// every connection is served with, if any.
struct Preludes {
    trusted: Arc<TrustedProxies>,
    timeout: Duration,
    tls: Option<TlsAcceptor>,
}

/// What the listener knows of a connection once it is open: what `client` reads, and whether
/// its client certificate chains to the cluster CA (mutual TLS only).
#[derive(Debug, Clone, Copy)]
struct Accepted {
    connection: Connection,
    certified: bool,
}

/// Puts the connection in each request's extensions as `client::mark` reads it, and
/// [`crate::PeerCertified`] when its client certificate chains to the cluster CA.
async fn accepted(mut request: Request, next: Next) -> Response {
    if let Some(ConnectInfo(accepted)) =
        request.extensions().get::<ConnectInfo<Accepted>>().copied()
    {
        let extensions = request.extensions_mut();
        extensions.insert(ConnectInfo(accepted.connection));
        if accepted.certified {
            extensions.insert(crate::PeerCertified);
        }
    }
    next.run(request).await
}

/// A worker's side of the hand-over: axum accepts from it.
struct Handed {
    /// Connections from the accept loop; `None` once it is gone.
    incoming: Option<mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr)>>,
    load: Arc<AtomicUsize>,
    local: SocketAddr,
    prelude: Arc<Preludes>,
    /// Where a connection opened in a task of its own (a trusted peer's prelude read, a TLS
    /// handshake done) goes.
    read: mpsc::UnboundedSender<(Stream, Accepted)>,
    prelude_read: mpsc::UnboundedReceiver<(Stream, Accepted)>,
}

impl axum::serve::Listener for Handed {
    type Io = Stream;
    type Addr = Accepted;

    async fn accept(&mut self) -> (Stream, Accepted) {
        loop {
            // Both receivers are cancel-safe: axum drops this future at shutdown.
            let handed = match &mut self.incoming {
                Some(incoming) => tokio::select! {
                    Some(ready) = self.prelude_read.recv() => return ready,
                    handed = incoming.recv() => handed,
                },
                None => None,
            };
            let Some((stream, peer)) = handed else {
                // The accept loop is gone; the stop token ends this worker. Preludes under
                // way may still finish.
                self.incoming = None;
                match self.prelude_read.recv().await {
                    Some(ready) => return ready,
                    None => return std::future::pending().await,
                }
            };
            // Taken first: a connection that cannot be registered gives its load back too.
            let open = Open(self.load.clone());
            let stream = match TcpStream::from_std(stream) {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%peer, %error, "cannot take over a connection");
                    continue;
                }
            };
            let counted = Counted {
                stream,
                early: Vec::new(),
                early_at: 0,
                _open: open,
            };
            let trusted = self.prelude.trusted.trusts(peer.ip());
            if !trusted && self.prelude.tls.is_none() {
                let connection = Connection {
                    peer,
                    proxied: None,
                };
                let accepted = Accepted {
                    connection,
                    certified: false,
                };
                return (Stream::Plain(counted), accepted);
            }
            // A trusted peer may open with a PROXY header, and a TLS handshake takes round
            // trips: both on a task of their own, so a slow one keeps no other connection
            // waiting.
            let (prelude, read) = (self.prelude.clone(), self.read.clone());
            tokio::spawn(async move {
                if let Some(ready) = open_connection(counted, peer, trusted, &prelude).await {
                    let _ = read.send(ready);
                }
            });
        }
    }

    /// This end of the connections (axum asks only to log it).
    fn local_addr(&self) -> io::Result<Accepted> {
        let connection = Connection {
            peer: self.local,
            proxied: None,
        };
        Ok(Accepted {
            connection,
            certified: false,
        })
    }
}

/// Opens a connection that needs more than its TCP handshake: a trusted peer's PROXY header
/// read, then the TLS handshake if the listener serves TLS. `None` when it is closed instead.
async fn open_connection(
    counted: Counted,
    peer: SocketAddr,
    trusted: bool,
    prelude: &Preludes,
) -> Option<(Stream, Accepted)> {
    let (counted, connection) = if trusted {
        open_proxied(counted, peer, prelude.timeout).await?
    } else {
        let connection = Connection {
            peer,
            proxied: None,
        };
        (counted, connection)
    };
    let Some(acceptor) = &prelude.tls else {
        let accepted = Accepted {
            connection,
            certified: false,
        };
        return Some((Stream::Plain(counted), accepted));
    };
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(counted)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            // A client that does not trust this replica's certificate, speaks plain HTTP to
            // it, or presents a certificate of another CA: its own business, at debug.
            tracing::debug!(%peer, %error, "closing a connection: its TLS handshake failed");
            return None;
        }
        Err(_) => {
            tracing::debug!(
                %peer,
                "closing a connection: no TLS handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            );
            return None;
        }
    };
    // With mutual TLS the verifier let in only certificates that chain to the cluster CA; a
    // client without one has none here. Without mutual TLS none is asked for.
    let certified = stream
        .get_ref()
        .1
        .peer_certificates()
        .is_some_and(|certificates| !certificates.is_empty());
    let accepted = Accepted {
        connection,
        certified,
    };
    Some((Stream::Tls(Box::new(stream)), accepted))
}

/// Reads a trusted peer's PROXY header, if it sent one, within `timeout`; `None` when the
/// connection is closed instead (a header that is malformed, too long or too slow, or a
/// peer that went away).
async fn open_proxied(
    mut counted: Counted,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<(Counted, Connection)> {
    let read = tokio::time::timeout(timeout, read_prelude(&mut counted.stream)).await;
    let (bytes, prelude) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(PreludeFailure::Header(why))) => {
            // The operator's own proxy speaks a PROXY protocol this server cannot read: worth
            // their attention, unlike a client that went away.
            tracing::warn!(%peer, "a trusted proxy sent {why}; closing its connection");
            return None;
        }
        Ok(Err(PreludeFailure::Connection(why))) => {
            tracing::debug!(%peer, "closing a connection from a trusted proxy: {why}");
            return None;
        }
        Err(_) => {
            tracing::debug!(
                %peer,
                "closing a connection from a trusted proxy: no complete request or PROXY header \
                 within {} ms",
                timeout.as_millis()
            );
            return None;
        }
    };
    let (skip, proxied) = match prelude {
        Prelude::Header { len, source } => (len, source),
        _ => (0, None),
    };
    if skip < bytes.len() {
        counted.early = bytes;
        counted.early_at = skip;
    }
    Some((counted, Connection { peer, proxied }))
}

/// Why a connection's prelude was not read.
enum PreludeFailure {
    /// The PROXY header cannot be read.
    Header(&'static str),
    /// The connection failed or closed first.
    Connection(String),
}

/// The first bytes of a connection, enough to tell whether they start with a PROXY header
/// and to read it whole; answers them and what they are (never [`Prelude::More`]). Bytes of
/// the request behind the header may come along: they are read in chunks, not byte by byte.
async fn read_prelude(stream: &mut TcpStream) -> Result<(Vec<u8>, Prelude), PreludeFailure> {
    let mut bytes = Vec::with_capacity(512);
    loop {
        match client::prelude(&bytes) {
            Prelude::More => {}
            Prelude::Invalid(why) => return Err(PreludeFailure::Header(why)),
            done => return Ok((bytes, done)),
        }
        let room = PRELUDE_MAX.saturating_sub(bytes.len()).min(2048);
        if room == 0 {
            return Err(PreludeFailure::Header("a PROXY header that is too long"));
        }
        let start = bytes.len();
        bytes.resize(start + room, 0);
        let n = stream
            .read(&mut bytes[start..])
            .await
            .map_err(|e| PreludeFailure::Connection(e.to_string()))?;
        bytes.truncate(start + n);
        if n == 0 {
            return Err(PreludeFailure::Connection(
                "it closed before its first request".to_owned(),
            ));
        }
    }
}

/// A connection, registered with its worker's reactor, that counts toward the worker's load
/// while it is open. `early` holds bytes read before hyper took over (behind a PROXY header):
/// they are read first, from `early_at`.
struct Counted {
    stream: TcpStream,
    early: Vec<u8>,
    early_at: usize,
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
        if self.early_at < self.early.len() {
            let this = &mut *self;
            let n = buf.remaining().min(this.early.len() - this.early_at);
            buf.put_slice(&this.early[this.early_at..this.early_at + n]);
            this.early_at += n;
            if this.early_at == this.early.len() {
                this.early = Vec::new();
                this.early_at = 0;
            }
            return Poll::Ready(Ok(()));
        }
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
/// A served connection: as it came, or inside TLS (`--cluster-tls-cert`).
enum Stream {
    Plain(Counted),
    Tls(Box<tokio_rustls::server::TlsStream<Counted>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(stream) => stream.is_write_vectored(),
            Stream::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}
