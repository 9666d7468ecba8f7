//! Ownership: waiting until every replica sees the same members and owners and both owners
//! hold the repository, finding the owner the non-owner forwards to, and the replicas going
//! idle; the `/metrics` counters that prove the routing.

use super::http::{Conn, Face, api_request, call, check};
use super::replicas::Replica;
use super::{Options, REPO, SECRET_HEADER};
use anyhow::{Context, Result, bail};
use bench::TextFile as File;
use std::time::{Duration, Instant};

/// Who is who, as indices into the replicas.
#[derive(Clone, Copy)]
pub(super) struct Roles {
    /// The owner the non-owner forwards to (proven by its `from_replicas` counter).
    pub(super) target: usize,
    /// The other owner.
    pub(super) other: usize,
    pub(super) non_owner: usize,
}

/// One replica's `/_cluster/status`: live members and the repository's owners.
struct View {
    live: usize,
    owners: Vec<String>,
}

async fn view(replica: &Replica, secret: &str) -> Result<View> {
    let answer = call(
        &replica.authority,
        "GET",
        "/_cluster/status",
        &[(SECRET_HEADER, secret)],
        None,
    )
    .await?;
    if answer.status != 200 {
        bail!(
            "/_cluster/status of replica {} answered HTTP {}: {}",
            replica.number,
            answer.status,
            answer.text()
        );
    }
    let json = answer.json()?;
    let live = json["members"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
    let owners = json["repositories"]
        .as_array()
        .and_then(|repos| repos.iter().find(|r| r["name"] == REPO))
        .and_then(|r| r["owners"].as_array())
        .map(|owners| {
            owners
                .iter()
                .filter_map(|o| o.as_str())
                .map(|o| o.trim_end_matches('/').to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(View { live, owners })
}

async fn metrics(replica: &Replica) -> Result<String> {
    let answer = call(&replica.authority, "GET", "/metrics", &[], None).await?;
    if answer.status != 200 {
        bail!(
            "/metrics of replica {} answered HTTP {}",
            replica.number,
            answer.status
        );
    }
    Ok(answer.text())
}

/// The value of the unlabelled series `name` in a Prometheus exposition.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A counter of every replica.
pub(super) async fn counters(replicas: &[Replica], name: &str) -> Result<Vec<u64>> {
    let mut values = Vec::new();
    for replica in replicas {
        values.push(metric(&metrics(replica).await?, name).with_context(|| {
            format!(
                "replica {}'s /metrics has no {name}: is it in cluster mode?",
                replica.number
            )
        })?);
    }
    Ok(values)
}

pub(super) const FORWARDED: &str = "csg_cluster_forwarded_total";
pub(super) const FAILOVERS: &str = "csg_cluster_forward_failovers_total";
pub(super) const UNANSWERED: &str = "csg_cluster_forward_unanswered_total";
pub(super) const FROM_REPLICAS: &str = "csg_cluster_from_replicas_total";

/// Waits until every replica sees every member live and the same two owners, both owners
/// hold the repository (a read there answers 200 and is not forwarded), and a read at the
/// non-owner is forwarded and answers 200; finds the owner it forwards to.
pub(super) async fn settle(
    options: &Options,
    replicas: &mut [Replica],
    secret: &str,
    probe: &File,
) -> Result<Roles> {
    let deadline = Instant::now() + options.settle;
    let mut reported = Instant::now();
    loop {
        for replica in replicas.iter_mut() {
            replica.check_running()?;
        }
        let state = match settle_once(replicas, secret, probe).await {
            Ok(Ok(roles)) => return Ok(roles),
            Ok(Err(state)) => state,
            Err(error) => format!("{error:#}"),
        };
        if Instant::now() > deadline {
            bail!(
                "ownership did not settle within {:?}: {state}",
                options.settle
            );
        }
        if reported.elapsed() > Duration::from_secs(10) {
            eprintln!("bench/cluster: still waiting: {state}");
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One look: `Ok(Err(what is missing))` while not settled.
async fn settle_once(
    replicas: &[Replica],
    secret: &str,
    probe: &File,
) -> Result<std::result::Result<Roles, String>> {
    let mut views = Vec::new();
    for replica in replicas {
        views.push(view(replica, secret).await?);
    }
    let lives: Vec<usize> = views.iter().map(|v| v.live).collect();
    if lives.iter().any(|&live| live != replicas.len()) {
        return Ok(Err(format!(
            "live members as each replica sees them: {lives:?}"
        )));
    }
    let owners = views[0].owners.clone();
    if views.iter().any(|v| v.owners != owners) {
        let all: Vec<&Vec<String>> = views.iter().map(|v| &v.owners).collect();
        return Ok(Err(format!(
            "the replicas name different owners of {REPO}: {all:?}"
        )));
    }
    if owners.len() != 2 {
        return Ok(Err(format!("{REPO} has owners {owners:?}, not two")));
    }
    let index = |url: &str| replicas.iter().position(|r| r.url == url);
    let (Some(first), Some(second)) = (index(&owners[0]), index(&owners[1])) else {
        bail!("the owners {owners:?} are not the replicas this run started");
    };
    let Some(non_owner) = (0..replicas.len()).find(|&i| i != first && i != second) else {
        bail!("every replica owns {REPO}");
    };
    for &owner in &[first, second] {
        let replica = &replicas[owner];
        let ready = call(&replica.authority, "GET", "/readyz", &[], None).await?;
        let served = ready
            .json()
            .ok()
            .and_then(|j| j["repositories_served"].as_u64());
        if served != Some(1) {
            return Ok(Err(format!(
                "owner {} (replica {}) serves {served:?} repositories (fetching {REPO})",
                replica.url, replica.number
            )));
        }
        let before = metric(&metrics(replica).await?, FORWARDED);
        let answer = probe_read(replica, probe).await?;
        let after = metric(&metrics(replica).await?, FORWARDED);
        if before != after {
            return Ok(Err(format!(
                "owner {} (replica {}) still forwards reads of {REPO}",
                replica.url, replica.number
            )));
        }
        if let Err(error) = answer {
            return Ok(Err(format!(
                "a read at owner {} (replica {}): {error:#}",
                replica.url, replica.number
            )));
        }
    }
    // The non-owner forwards to the owner it prefers: see whose counter moves.
    let before = counters(replicas, FROM_REPLICAS).await?;
    let probes = 5;
    for _ in 0..probes {
        if let Err(error) = probe_read(&replicas[non_owner], probe).await? {
            return Ok(Err(format!(
                "a read at the non-owner {} (replica {}), forwarded: {error:#}",
                replicas[non_owner].url, replicas[non_owner].number
            )));
        }
    }
    let after = counters(replicas, FROM_REPLICAS).await?;
    let moved: Vec<u64> = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let target = if moved[first] == probes {
        first
    } else if moved[second] == probes {
        second
    } else {
        return Ok(Err(format!(
            "{probes} forwarded reads did not all reach one owner: calls from replicas by replica {moved:?}"
        )));
    };
    Ok(Ok(Roles {
        target,
        other: if target == first { second } else { first },
        non_owner,
    }))
}

/// A whole-file JSON API read of `file` at `replica` on a connection of its own; the outer
/// error is a transport failure, the inner one a wrong answer.
async fn probe_read(replica: &Replica, file: &File) -> Result<Result<()>> {
    let request = api_request(&replica.authority, file);
    let mut conn = Conn::connect(&replica.authority).await?;
    let answer = conn.exchange(&request).await?;
    Ok(check(Face::Api, &answer, file))
}

/// Waits until every replica used under 1% CPU for 4 half-second intervals in a row (the
/// owners' first index build and plugin preparation are over), at most `bound`; past it,
/// warns and measures anyway.
pub(super) async fn wait_idle(replicas: &mut [Replica], bound: Duration) -> Result<()> {
    let deadline = Instant::now() + bound;
    let interval = Duration::from_millis(500);
    let mut last: Vec<f64> = replicas.iter().map(Replica::cpu_us).collect();
    let (mut quiet, mut reported) = (0, Instant::now());
    while quiet < 4 {
        for replica in replicas.iter_mut() {
            replica.check_running()?;
        }
        if Instant::now() > deadline {
            eprintln!(
                "bench/cluster: warning: the replicas did not go idle within {bound:?}; measuring anyway"
            );
            return Ok(());
        }
        tokio::time::sleep(interval).await;
        let now: Vec<f64> = replicas.iter().map(Replica::cpu_us).collect();
        let busy: Vec<f64> = now
            .iter()
            .zip(&last)
            .map(|(n, l)| (n - l) / interval.as_micros() as f64 * 100.0)
            .collect();
        last = now;
        quiet = if busy.iter().all(|&percent| percent < 1.0) {
            quiet + 1
        } else {
            0
        };
        if reported.elapsed() > Duration::from_secs(15) {
            let shown: Vec<String> = busy.iter().map(|p| format!("{p:.0}%")).collect();
            eprintln!(
                "bench/cluster: replicas still busy (CPU of replicas 1..{}: {})",
                replicas.len(),
                shown.join(", ")
            );
            reported = Instant::now();
        }
    }
    Ok(())
}
