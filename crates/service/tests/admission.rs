//! O-9, issue 42 point 3: heavy classes take a slot from their own bounded pool, wait
//! briefly, then answer busy; one client holds at most its share; what a cache answers (a
//! file highlighted before) takes no slot. Through the public service: a slot is held by
//! heavy work of another caller (`Service::offload`) exactly as a running call holds it.

use service::{
    BlameRequest, CallContext, Class, ClientKey, Cost, ErrorKind, HighlightRequest, Service,
    ServiceConfig,
};
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "test/repo";
/// Every test's bound: a hang is a failure.
const LIMIT: Duration = Duration::from_secs(60);

fn service() -> (SourceRepo, Service) {
    let source = SourceRepo::with_files(&[
        ("a.rs", b"fn a() {}\n"),
        ("b.rs", b"fn b() {}\n"),
        ("c.txt", b"one\ntwo\n"),
    ]);
    let config = ServiceConfig {
        heavy_calls: 2,
        search_queue_wait: Duration::from_millis(50),
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store(REPO, ""), config);
    (source, service)
}

/// A caller of `client` under the cost a tool or route would state.
fn caller(client: ClientKey, cost: Cost) -> CallContext {
    CallContext {
        client,
        ..CallContext::default()
    }
    .with_cost(cost)
}

/// Holds one slot of `class` for `client` until `release` resolves.
async fn hold(
    service: &Service,
    class: Class,
    client: ClientKey,
    release: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    let service = service.clone();
    let (held, started) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let ctx = caller(client, Cost::heavy(class, Duration::from_secs(30)));
        let work = service.offload(&ctx, class, move |_| {
            let _ = held.send(());
            let _ = release.blocking_recv();
        });
        work.await.expect("the holder gets its slot");
    });
    started.await.expect("the holder runs");
    task
}

fn highlight(path: &str) -> HighlightRequest {
    HighlightRequest {
        repo: REPO.into(),
        revision: None,
        path: path.into(),
        start_line: None,
        max_lines: None,
        max_bytes: None,
        definitions: false,
    }
}

fn blame() -> BlameRequest {
    BlameRequest {
        repo: REPO.into(),
        path: "c.txt".into(),
        ..BlameRequest::default()
    }
}

/// A file's first parse takes a `parse` slot: with the pool full it answers busy (saying to
/// retry), while a file highlighted before answers from the cache without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_a_first_parse_takes_a_slot_and_a_kept_one_does_not() {
    tokio::time::timeout(LIMIT, async {
        let (_source, service) = service();
        let ctx = caller(ClientKey::Token(1), Cost::light(Duration::from_secs(10)));
        service
            .highlight(&ctx, highlight("a.rs"))
            .await
            .expect("a.rs highlighted");
        let (free, release) = tokio::sync::oneshot::channel();
        let (free2, release2) = tokio::sync::oneshot::channel();
        let h1 = hold(&service, Class::Parse, ClientKey::Token(2), release).await;
        let h2 = hold(&service, Class::Parse, ClientKey::Token(3), release2).await;
        let busy = service
            .highlight(&ctx, highlight("b.rs"))
            .await
            .expect_err("no parse slot is free");
        assert_eq!(busy.kind, ErrorKind::Busy, "{}", busy.message);
        assert!(busy.message.contains("retry"), "{}", busy.message);
        service
            .highlight(&ctx, highlight("a.rs"))
            .await
            .expect("a kept file needs no slot");
        let _ = (free.send(()), free2.send(()));
        let _ = (h1.await, h2.await);
        service
            .highlight(&ctx, highlight("b.rs"))
            .await
            .expect("b.rs once a slot is free");
    })
    .await
    .expect("within its bound");
}

/// `blame` takes a slot on every call: one client holding its share (half of 2) waits for
/// its own slot and is refused; another client is served from the rest of the pool; the
/// pool's figures say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_one_client_holds_its_share_and_another_gets_the_rest() {
    tokio::time::timeout(LIMIT, async {
        let (_source, service) = service();
        let blame_cost = Cost::heavy(Class::Blame, Duration::from_secs(6));
        let (free, release) = tokio::sync::oneshot::channel();
        let flooder = ClientKey::Address("192.0.2.7".parse().expect("address"));
        let held = hold(&service, Class::Blame, flooder, release).await;
        let refused = service
            .blame(&caller(flooder, blame_cost), blame())
            .await
            .expect_err("the flooder holds its share");
        assert_eq!(refused.kind, ErrorKind::Busy);
        assert!(refused.message.contains("of yours"), "{}", refused.message);
        let answer = service
            .blame(&caller(ClientKey::Token(9), blame_cost), blame())
            .await
            .expect("another client gets the other slot");
        assert_eq!(answer.total_lines, 2);
        let stats = service.admission_stats();
        let blame = stats
            .iter()
            .find(|s| s.class == Class::Blame)
            .expect("a pool");
        assert_eq!((blame.slots, blame.busy, blame.refused), (2, 1, 1));
        let _ = free.send(());
        let _ = held.await;
    })
    .await
    .expect("within its bound");
}
