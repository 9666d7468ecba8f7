//! Versioned schema migrations, one list per component, recorded in `csg_schema_migrations`.
//! Replicas starting together take turns through one advisory lock.

use std::collections::BTreeMap;

use postgres::{Client, Transaction};

use crate::error::{self, Error, Kind};

/// One schema change of a component. Versions only grow: a new change is appended with the
/// next version, an applied one is never edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// 1, 2, 3, … within the component.
    pub version: i64,
    /// A short name, recorded beside the version.
    pub name: &'static str,
    /// The statements, run in one transaction.
    pub sql: &'static str,
}

/// The key of the transaction-level advisory lock every migration takes ("csg_migr").
const LOCK_KEY: i64 = 0x6373_675f_6d69_6772;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS csg_schema_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)";

/// Checks the list itself (a mistake of the program, found before any database work) and
/// returns it in version order.
pub(crate) fn checked(component: &str, migrations: &[Migration]) -> Result<Vec<Migration>, Error> {
    if component.is_empty() {
        return Err(Error::Migration("the component name is empty".to_owned()));
    }
    let mut sorted = migrations.to_vec();
    sorted.sort_by_key(|m| m.version);
    for pair in sorted.windows(2) {
        if pair[0].version == pair[1].version {
            return Err(Error::Migration(format!(
                "{component} has two migrations numbered {}; give each its own version",
                pair[0].version
            )));
        }
    }
    if let Some(first) = sorted.first()
        && first.version < 1
    {
        return Err(Error::Migration(format!(
            "{component} migration {:?} has version {}; versions start at 1",
            first.name, first.version
        )));
    }
    Ok(sorted)
}

/// Applies the migrations of `component` that the database lacks, each in its own transaction
/// that first takes the lock and looks again, so concurrent callers apply each version once.
pub(crate) fn apply(
    client: &mut Client,
    component: &str,
    migrations: &[Migration],
) -> Result<(), Error> {
    let recorded = {
        let mut tx = locked(client)?;
        tx.batch_execute(CREATE_TABLE)?;
        let rows = tx.query(
            "SELECT version, name FROM csg_schema_migrations WHERE component = $1",
            &[&component],
        )?;
        tx.commit()?;
        let mut recorded = BTreeMap::new();
        for row in rows {
            recorded.insert(row.try_get::<_, i64>(0)?, row.try_get::<_, String>(1)?);
        }
        recorded
    };
    let known = migrations.last().map_or(0, |m| m.version);
    if let Some((&newest, name)) = recorded.last_key_value()
        && newest > known
    {
        return Err(Error::Migration(format!(
            "this database was migrated by a newer csg: {component} is at version {newest} \
             ({name}), this csg knows versions up to {known}; upgrade csg"
        )));
    }
    for m in migrations {
        match recorded.get(&m.version) {
            Some(name) if name != m.name => tracing::warn!(
                component,
                version = m.version,
                recorded = name.as_str(),
                known = m.name,
                "a recorded migration has another name than this csg's; keeping it as applied"
            ),
            Some(_) => {}
            None => apply_one(client, component, m, &recorded)?,
        }
    }
    Ok(())
}

fn apply_one(
    client: &mut Client,
    component: &str,
    m: &Migration,
    recorded: &BTreeMap<i64, String>,
) -> Result<(), Error> {
    if let Some((&later, _)) = recorded.range(m.version + 1..).next() {
        return Err(Error::Migration(format!(
            "{component} migration {} ({}) is not applied but the later version {later} is; \
             a new migration must come after every released one: renumber it",
            m.version, m.name
        )));
    }
    let mut tx = locked(client)?;
    let done = tx.query_opt(
        "SELECT 1 FROM csg_schema_migrations WHERE component = $1 AND version = $2",
        &[&component, &m.version],
    )?;
    if done.is_some() {
        // Another process applied it while this one waited for the lock.
        return Ok(tx.commit()?);
    }
    tx.batch_execute(m.sql)
        .map_err(|e| failed(component, m, e))?;
    tx.execute(
        "INSERT INTO csg_schema_migrations (component, version, name) VALUES ($1, $2, $3)",
        &[&component, &m.version, &m.name],
    )?;
    tx.commit().map_err(|e| failed(component, m, e))?;
    tracing::info!(
        component,
        version = m.version,
        name = m.name,
        "applied a database migration"
    );
    Ok(())
}

/// A transaction holding the migration lock; no statement timeout, since a migration may
/// rightly take long and the lock waits for another process's migrations.
fn locked(client: &mut Client) -> Result<Transaction<'_>, Error> {
    let mut tx = client.transaction()?;
    tx.batch_execute("SET LOCAL statement_timeout = 0")?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])?;
    Ok(tx)
}

fn failed(component: &str, m: &Migration, e: postgres::Error) -> Error {
    match error::kind(&e) {
        Kind::Query => Error::Migration(format!(
            "{component} migration {} ({}) failed and was rolled back: {}; the database keeps \
             the previous version: fix the migration or the database, then start again",
            m.version,
            m.name,
            error::describe(&e)
        )),
        Kind::Unreachable | Kind::Refused => Error::from(e),
    }
}
