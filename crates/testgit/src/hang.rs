//! Fetches that hang, deterministically and on this machine only, for tests of what must not
//! wait on a stuck fetch (maintenance, sweeps, shutdown).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes every later fetch of the repository at `source` hang: its config includes a FIFO
/// nobody writes, so the `git-upload-pack` serving the fetch blocks opening it. Any other git
/// command in `source` hangs meanwhile too: commit before, or after the drop. Dropping the
/// guard restores the config and lets every blocked reader go on (it opens the FIFO for
/// writing once and closes it, so they read an empty include).
pub struct HungFetches {
    config: PathBuf,
    original: Vec<u8>,
    fifo: PathBuf,
    /// The path fetches name the source by (what `git-upload-pack` is started with).
    source: PathBuf,
}

impl HungFetches {
    /// Starts hanging fetches of `source` (a work tree with `.git/`).
    pub fn new(source: &Path) -> Self {
        Self::with_git_dir(source, &source.join(".git"))
    }

    /// Starts hanging fetches of the bare repository `source`.
    pub fn bare(source: &Path) -> Self {
        Self::with_git_dir(source, source)
    }

    fn with_git_dir(source: &Path, git_dir: &Path) -> Self {
        let fifo = git_dir.join("hang.fifo");
        let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success(), "mkfifo failed");
        let config = git_dir.join("config");
        let original = std::fs::read(&config).expect("read .git/config");
        let mut hung = original.clone();
        hung.extend_from_slice(format!("[include]\n\tpath = {}\n", fifo.display()).as_bytes());
        std::fs::write(&config, hung).expect("write .git/config");
        Self {
            config,
            original,
            fifo,
            source: source.to_path_buf(),
        }
    }

    /// Whether a live (not zombie) `git-upload-pack` serves the source right now: a fetch
    /// is under way, and blocked on the FIFO (read from `/proc`, so Linux only).
    #[cfg(target_os = "linux")]
    pub fn blocked(&self) -> bool {
        let needle = self.source.to_string_lossy().into_owned();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return false;
        };
        procs.flatten().any(|entry| {
            let dir = entry.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            if !cmdline.contains("upload-pack") || !cmdline.contains(&needle) {
                return false;
            }
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        })
    }
}

impl Drop for HungFetches {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.config, &self.original);
        // A writer that opens and closes releases every reader blocked in open(2); without a
        // reader, a non-blocking open fails at once (ENXIO) and there is nothing to release.
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo);
    }
}
