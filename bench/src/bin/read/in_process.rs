//! The service in this process: the corpus prepared as `csg` would, and `read` without a
//! transport.

use super::REPO;
use super::table::{Row, measured};
use anyhow::{Result, bail};
use bench::TextFile as File;
use service::{CallContext, ReadRequest, Service, ServiceConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Registers, syncs and indexes the corpus in `data` exactly as `csg --repo NAME=PATH` would
/// (same name, same canonical source), so the servers reuse the registration and the index.
pub(super) async fn prepare(data: &Path, source: &Path) -> Result<Service> {
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: data.to_path_buf(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )?;
    let service = Service::new(store, ServiceConfig::default());
    service
        .register(service::RegisterRequest {
            name: REPO.into(),
            source: source.to_string_lossy().into_owned(),
            registered_path: String::new(),
            branch: None,
            private: None,
        })
        .await?;
    service.sync(REPO.into()).await?;
    service.index(REPO.into(), |_| {}).await?;
    Ok(service)
}

/// The service's own `read` path (with plugin enrichment, as the MCP tool calls it), in this
/// process: no transport, no JSON.
pub(super) async fn in_process(service: &Service, warm: &[File], files: &[File]) -> Result<Row> {
    let ctx = CallContext::default();
    let read = |file: &File| {
        let service = service.clone();
        let ctx = ctx.clone();
        let request = ReadRequest {
            repo: REPO.into(),
            revision: None,
            path: file.path.clone(),
            start_line: Some(1),
            end_line: Some(file.lines),
            plugins: None,
        };
        let expect = file.bytes;
        async move {
            let (item, _) = service.read_enriched(&ctx, request).await?;
            let range = item
                .outcome
                .map_err(|e| anyhow::anyhow!("read failed: {e}"))?;
            if range.content.len() as u64 != expect || range.has_more {
                bail!(
                    "a whole-file read answered {} bytes, not {expect}",
                    range.content.len()
                );
            }
            Ok(())
        }
    };
    for file in warm {
        read(file).await?;
    }
    let (row, ()) = measured(
        "service in process (no I/O)",
        std::process::id(),
        None,
        async {
            let mut latencies = Vec::with_capacity(files.len());
            for file in files {
                let t = Instant::now();
                read(file).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok((latencies, files.len(), ()))
        },
    )
    .await?;
    Ok(row)
}
