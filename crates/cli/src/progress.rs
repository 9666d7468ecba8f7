//! How the CLI shows long work (a clone, an index rebuild) as it goes (O-5): a bar on a
//! terminal; otherwise a log line per tenth of each phase, as the server logs its own.

use indicatif::{ProgressBar, ProgressStyle};
use service::TenthLog;
use std::io::IsTerminal;

/// The progress display of one task, labelled (the repository name).
pub(crate) struct Progress {
    label: String,
    bar: Option<ProgressBar>,
    log: TenthLog,
    phase: String,
}

impl Progress {
    /// A bar when stderr is a terminal, log lines otherwise.
    pub(crate) fn new(label: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0).with_prefix(label.to_string());
            if let Ok(style) =
                ProgressStyle::with_template("{prefix} {msg} [{bar:40}] {pos}/{len} ({elapsed})")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Self {
            label: label.to_string(),
            bar,
            log: TenthLog::default(),
            phase: String::new(),
        }
    }

    /// `done` of `total` (when known) units of `phase` are done.
    pub(crate) fn update(&mut self, phase: &str, done: u64, total: Option<u64>) {
        match &self.bar {
            Some(bar) => {
                if phase != self.phase {
                    phase.clone_into(&mut self.phase);
                    bar.set_message(phase.to_string());
                }
                bar.set_length(total.unwrap_or(done));
                bar.set_position(done);
            }
            None => {
                if let Some(total) = total
                    && self.log.crossed(phase, done, total)
                {
                    tracing::info!(repo = %self.label, phase, done, total, "progress");
                }
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
