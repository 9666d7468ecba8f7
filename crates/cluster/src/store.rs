//! The members table and every statement on it. Each function runs on a metadb connection
//! thread; times and liveness come from the database's clock (`now()`), never this host's.

use std::time::{Duration, SystemTime};

use metadb::postgres::{Client, Row};
use metadb::{Database, Migration};

use crate::{Member, NodeUrl};

/// The metadb change topic of membership: joins, drains and leaves notify it.
pub(crate) const TOPIC: &str = "cluster";

/// The metadb migration component.
const COMPONENT: &str = "cluster";

const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "members",
    sql: "CREATE SEQUENCE csg_members_incarnation;
          CREATE TABLE csg_members (
              node_url TEXT PRIMARY KEY,
              started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
              last_heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),
              draining BOOLEAN NOT NULL DEFAULT false,
              incarnation BIGINT NOT NULL
          );",
}];

/// Creates or upgrades the members table.
pub(crate) fn migrate(db: &Database) -> Result<(), metadb::Error> {
    db.migrate(COMPONENT, MIGRATIONS)
}

/// A duration as whole milliseconds for `$n::bigint * interval '1 millisecond'`.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// What a join found and made.
pub(crate) struct Joined {
    /// This run's incarnation: the row is ours while it holds this number.
    pub(crate) incarnation: i64,
    pub(crate) heartbeat: SystemTime,
    /// The row belonged to a process that was still heartbeating (another copy of this
    /// replica, or one that just died).
    pub(crate) took_over_live_row: bool,
    pub(crate) members: Vec<Member>,
}

/// Inserts this replica's row, or takes over the row of its URL (a restart): new incarnation,
/// started now, not draining. Notifies the topic.
pub(crate) fn join(
    client: &mut Client,
    url: &str,
    lease_ms: i64,
) -> Result<Joined, metadb::postgres::Error> {
    let mut tx = client.transaction()?;
    let previous = tx.query_opt(
        "SELECT last_heartbeat >= now() - $2::bigint * interval '1 millisecond'
         FROM csg_members WHERE node_url = $1 FOR UPDATE",
        &[&url, &lease_ms],
    )?;
    let row = tx.query_one(
        "INSERT INTO csg_members (node_url, started_at, last_heartbeat, draining, incarnation)
         VALUES ($1, now(), now(), false, nextval('csg_members_incarnation'))
         ON CONFLICT (node_url) DO UPDATE SET started_at = now(), last_heartbeat = now(),
             draining = false, incarnation = EXCLUDED.incarnation
         RETURNING incarnation, last_heartbeat",
        &[&url],
    )?;
    metadb::notify_change(&mut tx, TOPIC)?;
    tx.commit()?;
    Ok(Joined {
        incarnation: row.try_get(0)?,
        heartbeat: row.try_get(1)?,
        took_over_live_row: previous
            .map(|r| r.try_get::<_, bool>(0))
            .transpose()?
            .unwrap_or(false),
        members: read(client, lease_ms)?,
    })
}

/// The outcome of one heartbeat.
pub(crate) enum Beat {
    /// Written at this time; the members were read right after.
    Written(SystemTime, Vec<Member>),
    /// Another incarnation holds the row: nothing was written; the members were read.
    Superseded(Vec<Member>),
}

/// Writes this incarnation's heartbeat (re-inserting its row if it was forgotten meanwhile),
/// forgets members dead for longer than `forget_ms`, and reads the members.
pub(crate) fn beat(
    client: &mut Client,
    url: &str,
    incarnation: i64,
    lease_ms: i64,
    forget_ms: i64,
) -> Result<Beat, metadb::postgres::Error> {
    let written = client.query_opt(
        "UPDATE csg_members SET last_heartbeat = now()
         WHERE node_url = $1 AND incarnation = $2 RETURNING last_heartbeat",
        &[&url, &incarnation],
    )?;
    let written: Option<SystemTime> = match written {
        Some(row) => Some(row.try_get(0)?),
        None => reinsert(client, url, incarnation)?,
    };
    client.execute(
        "DELETE FROM csg_members
         WHERE last_heartbeat < now() - $1::bigint * interval '1 millisecond'",
        &[&forget_ms],
    )?;
    let members = read(client, lease_ms)?;
    Ok(match written {
        Some(at) => Beat::Written(at, members),
        None => Beat::Superseded(members),
    })
}

/// Puts back the row of an incarnation whose row is gone (forgotten while it was cut off, or
/// deleted by hand); `None` if another incarnation holds the URL.
fn reinsert(
    client: &mut Client,
    url: &str,
    incarnation: i64,
) -> Result<Option<SystemTime>, metadb::postgres::Error> {
    let mut tx = client.transaction()?;
    let row = tx.query_opt(
        "INSERT INTO csg_members (node_url, started_at, last_heartbeat, draining, incarnation)
         VALUES ($1, now(), now(), false, $2)
         ON CONFLICT (node_url) DO NOTHING RETURNING last_heartbeat",
        &[&url, &incarnation],
    )?;
    let Some(row) = row else {
        return Ok(None);
    };
    metadb::notify_change(&mut tx, TOPIC)?;
    tx.commit()?;
    tracing::warn!(
        node_url = url,
        "this replica's membership row was gone (forgotten or deleted); wrote it again"
    );
    Ok(Some(row.try_get(0)?))
}

/// Marks this incarnation's row draining; `false` if the row is not this incarnation's.
/// Notifies the topic.
pub(crate) fn drain(
    client: &mut Client,
    url: &str,
    incarnation: i64,
    lease_ms: i64,
) -> Result<Option<Vec<Member>>, metadb::postgres::Error> {
    let mut tx = client.transaction()?;
    let changed = tx.execute(
        "UPDATE csg_members SET draining = true
         WHERE node_url = $1 AND incarnation = $2",
        &[&url, &incarnation],
    )?;
    if changed == 0 {
        return Ok(None);
    }
    metadb::notify_change(&mut tx, TOPIC)?;
    tx.commit()?;
    Ok(Some(read(client, lease_ms)?))
}

/// Deletes this incarnation's row (never another incarnation's, e.g. of a restart already
/// running) and notifies the topic; then reads the members.
pub(crate) fn leave(
    client: &mut Client,
    url: &str,
    incarnation: i64,
    lease_ms: i64,
) -> Result<Vec<Member>, metadb::postgres::Error> {
    let mut tx = client.transaction()?;
    let deleted = tx.execute(
        "DELETE FROM csg_members WHERE node_url = $1 AND incarnation = $2",
        &[&url, &incarnation],
    )?;
    if deleted > 0 {
        metadb::notify_change(&mut tx, TOPIC)?;
    }
    tx.commit()?;
    read(client, lease_ms)
}

/// Every member; live means a heartbeat within the lease by the database's `now()`.
pub(crate) fn read(
    client: &mut Client,
    lease_ms: i64,
) -> Result<Vec<Member>, metadb::postgres::Error> {
    let rows = client.query(
        "SELECT node_url, started_at, last_heartbeat, draining,
                last_heartbeat >= now() - $1::bigint * interval '1 millisecond'
         FROM csg_members",
        &[&lease_ms],
    )?;
    rows.iter().map(member).collect()
}

fn member(row: &Row) -> Result<Member, metadb::postgres::Error> {
    Ok(Member {
        node_url: NodeUrl::stored(row.try_get(0)?),
        started_at: row.try_get(1)?,
        last_heartbeat: row.try_get(2)?,
        draining: row.try_get(3)?,
        live: row.try_get(4)?,
    })
}
