//! `read` and `read_many` (R-1..R-4) in the service frame. The base read runs in place on
//! the async thread while it inflates little, else on the blocking pool (with a `large_read`
//! slot when it inflates a large blob itself: issue 42 point 5); enrichment by repository
//! plugins follows on the same lease (W-33).

use crate::frame::{self, Op, RepoCall};
use crate::{
    CallContext, Class, Enrichment, ErrorKind, FileRange, Inner, PluginSelection, ReadItem,
    ReadManyAnswer, ReadManyRequest, ReadRange, ReadRequest, Service, ServiceError, enrich, lines,
};
use gitstore::RepoPath;
use std::sync::Arc;

impl Service {
    /// `read` and `read_many` in the service frame: the base read (`check` the request,
    /// alias, access, lease, `base`) is what the frame counts (R-7: the base figures stop
    /// there); enrichment follows while the lease still holds the commit and its registry
    /// snapshot (W-33).
    ///
    /// A read that is cheap runs right here on the async thread: a thread hand-off costs more
    /// than reading a cached or small file. What is not cheap moves to the blocking pool: a
    /// base read that would inflate more than [`INLINE_INFLATE_BYTES`] of uncached blobs (it
    /// is then redone there from the start) and an enrichment that has to discover or run a
    /// plugin.
    async fn read_frame<A, B>(
        &self,
        ctx: &CallContext,
        request: ReadFrame,
        check: impl FnOnce() -> Result<(), ServiceError>,
        items: fn(&A) -> &[ReadItem],
        base: B,
    ) -> Result<(A, Enrichment), ServiceError>
    where
        A: Send + 'static,
        B: Fn(&Inner, &gitstore::Lease, &mut Allowance) -> Result<Option<A>, ServiceError>
            + Send
            + Sync
            + 'static,
    {
        let ReadFrame {
            op,
            repo,
            revision,
            plugins,
            enrich,
        } = request;
        let (frame, answer, lease) = self
            .framed(ctx, op, repo, move |call| async move {
                check()?;
                let mut frame = Frame {
                    call,
                    revision,
                    plugins,
                    enrich,
                };
                let base: Arc<Base<A>> = Arc::new(base);
                let mut allowance = Allowance::inline();
                if let Some(read) = self.inner.base_read(&frame, &*base, &mut allowance) {
                    return read.map(|(answer, lease)| (Arc::new(frame), answer, lease));
                }
                // Issue 42 point 5: a read that inflates a large blob takes a slot of its
                // class first; one that will wait for another call's decode of the blob
                // inflates nothing and takes none (nor does one moved for a follow).
                if allowance.inflates
                    && let Err(busy) = frame.call.admit(&self.inner, Class::LargeRead).await
                {
                    // Refused after its wait: meanwhile another call may have decoded the
                    // blob (cached now) or be decoding it (to be shared), which needs no slot.
                    let mut again = Allowance::inline();
                    match self.inner.base_read(&frame, &*base, &mut again) {
                        Some(read) => {
                            return read.map(|(answer, lease)| (Arc::new(frame), answer, lease));
                        }
                        None if !again.inflates && busy.kind == ErrorKind::Busy => {}
                        None => return Err(busy),
                    }
                }
                let frame = Arc::new(frame);
                let read = {
                    let (frame, base) = (frame.clone(), base.clone());
                    self.blocking(move |inner| {
                        frame::on_blocking_pool(|| {
                            inner.base_read(&frame, &*base, &mut Allowance::unlimited())
                        })
                        .unwrap_or_else(|| {
                            Err(ServiceError::internal(
                                "a read without allowance stopped early; see the server log",
                            ))
                        })
                    })
                    .await
                };
                read.map(|(answer, lease)| (frame, answer, lease))
            })
            .await?;
        if !frame.enrich {
            return Ok((answer, Enrichment::default()));
        }
        let in_place = frame.enrichment(ctx, &lease, items(&answer));
        if let Some(enrichment) = self.inner.enrich_in_place(in_place) {
            return Ok((answer, enrichment));
        }
        let ctx = ctx.clone();
        self.blocking(move |inner| {
            let enrichment = inner.enrich(frame.enrichment(&ctx, &lease, items(&answer)));
            drop(lease);
            Ok((answer, enrichment))
        })
        .await
    }

    /// `read` (R-1..R-3), base only: no plugin runs. A failed base read is an error.
    pub async fn read(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
    ) -> Result<ReadItem, ServiceError> {
        self.read_with(ctx, req, false).await.map(|(item, _)| item)
    }

    /// `read` followed by repository-plugin enrichment (W-33): a successful base read is
    /// never turned into an error by anything the plugins do.
    pub async fn read_enriched(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
    ) -> Result<(ReadItem, Enrichment), ServiceError> {
        self.read_with(ctx, req, true).await
    }

    async fn read_with(
        &self,
        ctx: &CallContext,
        req: ReadRequest,
        enrich: bool,
    ) -> Result<(ReadItem, Enrichment), ServiceError> {
        let frame = ReadFrame {
            op: Op::READ,
            repo: req.repo,
            revision: req.revision,
            plugins: req.plugins,
            enrich,
        };
        let file = FileRange {
            path: req.path,
            start_line: req.start_line,
            end_line: req.end_line,
        };
        let base = move |inner: &Inner, lease: &gitstore::Lease, allowance: &mut Allowance| {
            let mut budget = lines::Budget::single(&inner.config);
            let mut read = Reading::new(allowance);
            let Some((path, range)) = inner.read_range(lease, &file, &mut budget, &mut read)?
            else {
                return Ok(None);
            };
            Ok(Some(ReadItem {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                path,
                outcome: Ok(range),
            }))
        };
        let (item, mut enrichment) = self
            .read_frame(ctx, frame, || Ok(()), std::slice::from_ref, base)
            .await?;
        if enrich {
            enrichment.operator_notes = self
                .read_notes(
                    ctx,
                    "read",
                    &item.repo,
                    &item.commit,
                    std::slice::from_ref(&item),
                )
                .await;
        }
        Ok((item, enrichment))
    }

    /// `read_many`, base only: one item per entry in request order, one shared
    /// budget; no plugin runs.
    pub async fn read_many(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
    ) -> Result<ReadManyAnswer, ServiceError> {
        self.read_many_with(ctx, req, false)
            .await
            .map(|(answer, _)| answer)
    }

    /// `read_many` followed by repository-plugin enrichment (W-33).
    pub async fn read_many_enriched(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
    ) -> Result<(ReadManyAnswer, Enrichment), ServiceError> {
        self.read_many_with(ctx, req, true).await
    }

    async fn read_many_with(
        &self,
        ctx: &CallContext,
        req: ReadManyRequest,
        enrich: bool,
    ) -> Result<(ReadManyAnswer, Enrichment), ServiceError> {
        let max = self.inner.config.max_batch_items;
        let asked = req.files.len();
        let check = move || {
            if asked == 0 {
                return Err(ServiceError::invalid(format!(
                    "`files` is empty; give 1 to {max} entries of {{path, start_line?, end_line?}}"
                )));
            }
            if asked > max {
                return Err(ServiceError::invalid(format!(
                    "`files` has {asked} entries; at most {max} per read_many: split the batch"
                )));
            }
            Ok(())
        };
        let frame = ReadFrame {
            op: Op::READ_MANY,
            repo: req.repo,
            revision: req.revision,
            plugins: req.plugins,
            enrich,
        };
        let files = req.files;
        let base = move |inner: &Inner, lease: &gitstore::Lease, allowance: &mut Allowance| {
            let mut budget = lines::Budget::batch(&inner.config);
            // One memo for the whole batch: items of one file decode it once (issue 42).
            let mut read = Reading::new(allowance);
            let items = files
                .iter()
                .map(|file| inner.read_item(lease, file, &mut budget, &mut read))
                .collect::<Option<Vec<_>>>();
            Ok(items.map(|items| ReadManyAnswer {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                items,
            }))
        };
        let (answer, mut enrichment) = self
            .read_frame(ctx, frame, check, ReadManyAnswer::items, base)
            .await?;
        if enrich {
            enrichment.operator_notes = self
                .read_notes(
                    ctx,
                    "read_many",
                    &answer.repo,
                    &answer.commit,
                    &answer.items,
                )
                .await;
        }
        Ok((answer, enrichment))
    }
}

impl Inner {
    /// The base read of a frame: access, then resolve and lease on one look at the registry
    /// (the lease keeps that snapshot for the whole call, R-8), then `base`. In place
    /// (`allowance` set), `None` when `base` ran out of allowance: redo it on the blocking
    /// pool.
    fn base_read<A>(
        &self,
        frame: &Frame,
        base: &Base<A>,
        allowance: &mut Allowance,
    ) -> Option<Result<(A, gitstore::Lease), ServiceError>> {
        let mut read = || -> Result<Option<(A, gitstore::Lease)>, ServiceError> {
            let opened = frame.call.open(self)?;
            let revision = frame.revision.as_deref();
            // In place, on the async thread, the lease never walks the history (issue 42
            // point 7): a commit only the retention walk can decide is redone on the
            // blocking pool (no large read: it takes no slot), where the walk runs under
            // the call's budget.
            let leased = if allowance.left.is_some() {
                opened.lease_inline(self, revision)
            } else {
                opened.lease(self, revision).map(Some)
            };
            let lease = match leased {
                Ok(Some(lease)) => lease,
                Ok(None) => return Ok(None),
                // Cluster mode: a copy still following a head another replica recorded. An
                // async thread must not wait for that; the blocking pool may (bounded), so
                // the read is redone there rather than answered "not synced".
                Err(gitstore::Error::NotSynced(_))
                    if allowance.left.is_some()
                        && self.store.holds_copy(opened.name()).unwrap_or(false) =>
                {
                    return Ok(None);
                }
                Err(error) => return Err(error.into()),
            };
            Ok(base(self, &lease, allowance)?.map(|answer| (answer, lease)))
        };
        read().transpose()
    }

    /// Reads one range under `budget`; answers the normalised path with it.
    /// `None`: the file is not cached and bigger than what is left of the allowance.
    fn read_range(
        &self,
        lease: &gitstore::Lease,
        file: &FileRange,
        budget: &mut lines::Budget,
        read: &mut Reading<'_>,
    ) -> Result<Option<(String, ReadRange)>, ServiceError> {
        let path = RepoPath::parse(&file.path)?;
        let Reading { allowance, memo } = read;
        let text = match lease.read_text_shared(&path, allowance.left.as_mut(), memo)? {
            gitstore::TextRead::Text(text) => text,
            gitstore::TextRead::Deferred { shared } => {
                allowance.inflates = !shared;
                return Ok(None);
            }
        };
        let window = lines::window(
            &text,
            file.start_line,
            file.end_line,
            self.config.default_lines,
        )
        .map_err(|e| ServiceError::invalid(e.message(path.as_str())))?;
        Ok(Some((path.to_string(), budget.take(&text, window))))
    }

    /// Reads one batch item under `budget`; a failure stays inside the item. `None` as
    /// for [`Inner::read_range`].
    fn read_item(
        &self,
        lease: &gitstore::Lease,
        file: &FileRange,
        budget: &mut lines::Budget,
        read: &mut Reading<'_>,
    ) -> Option<ReadItem> {
        let (path, outcome) = match self.read_range(lease, file, budget, read) {
            Ok(None) => return None,
            Ok(Some((path, range))) => (path, Ok(range)),
            Err(error) => {
                // Show the path as asked, escaped and bounded: it may be hostile input.
                let shown = file
                    .path
                    .chars()
                    .take(200)
                    .collect::<String>()
                    .escape_debug()
                    .to_string();
                (shown, Err(error.message))
            }
        };
        Some(ReadItem {
            repo: lease.repo().to_string(),
            commit: lease.commit().to_string(),
            path,
            outcome,
        })
    }
}

/// What differs between `read` and `read_many`, as they ask for a frame.
struct ReadFrame {
    op: Op,
    repo: String,
    revision: Option<String>,
    plugins: Option<Vec<PluginSelection>>,
    enrich: bool,
}

/// A `read` or `read_many` inside the service frame.
struct Frame {
    /// Access and lease go through it.
    call: RepoCall<String>,
    revision: Option<String>,
    plugins: Option<Vec<PluginSelection>>,
    enrich: bool,
}

impl Frame {
    /// The enrichment of this frame's answer, read under `lease`.
    fn enrichment<'a>(
        &'a self,
        ctx: &'a CallContext,
        lease: &'a gitstore::Lease,
        items: &'a [ReadItem],
    ) -> enrich::EnrichRequest<'a> {
        enrich::EnrichRequest {
            ctx,
            operation: self.call.operation(),
            lease,
            repo: lease.repo(),
            commit: lease.commit(),
            items,
            call: self.plugins.as_deref(),
        }
    }
}

/// Blob bytes not in the blob cache one read may inflate on the async thread that received
/// it (about a quarter of a millisecond of inflate); a read that needs more is moved to the
/// blocking pool. Whole-file reads of source files, tens of KiB each, stay in place.
const INLINE_INFLATE_BYTES: u64 = 256 * 1024;

/// How much a base read may still inflate, and what it found when it ran out.
struct Allowance {
    /// `Some(bytes)` in place, `None` without limit (on the blocking pool).
    left: Option<u64>,
    /// The read ran out of allowance on a blob it must inflate itself (no other call decodes
    /// it right now, which it would wait for instead).
    inflates: bool,
}

impl Allowance {
    /// What a read may inflate on the async thread that received it.
    fn inline() -> Self {
        Allowance {
            left: Some(INLINE_INFLATE_BYTES),
            inflates: false,
        }
    }

    /// No limit: on the blocking pool.
    fn unlimited() -> Self {
        Allowance {
            left: None,
            inflates: false,
        }
    }
}

/// One base read's allowance and the texts it read already (a `read_many` names one file in
/// several items: decoded once per call).
struct Reading<'a> {
    allowance: &'a mut Allowance,
    memo: gitstore::TextMemo,
}

impl<'a> Reading<'a> {
    fn new(allowance: &'a mut Allowance) -> Self {
        Reading {
            allowance,
            memo: gitstore::TextMemo::new(),
        }
    }
}

/// The base read of a frame, given its lease; `Ok(None)`: out of allowance.
type Base<A> = dyn Fn(&Inner, &gitstore::Lease, &mut Allowance) -> Result<Option<A>, ServiceError>
    + Send
    + Sync;

impl ReadManyAnswer {
    fn items(&self) -> &[ReadItem] {
        &self.items
    }
}
