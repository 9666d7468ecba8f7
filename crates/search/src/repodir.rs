//! The index directory on disk: repository names to directories (checked, so a name never
//! escapes the index directory nor looks like a generation), the lock file that serialises
//! builds of one repository across processes, and generation directory names.

use std::path::Path;

use crate::error::SearchError;

/// Checks a repository name and answers its directory components.
pub(crate) fn repo_components(repo: &str) -> Result<Vec<&str>, SearchError> {
    let invalid = || SearchError::InvalidRepo {
        repo: repo.to_owned(),
    };
    let parts: Vec<&str> = repo.split('/').collect();
    if repo.is_empty() || repo.len() > 512 {
        return Err(invalid());
    }
    for part in &parts {
        let ok = !part.is_empty()
            && !part.starts_with('.')
            && !part.starts_with("gen-")
            && !part.starts_with("staging-")
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !ok {
            return Err(invalid());
        }
    }
    Ok(parts)
}

/// The lock file that serialises builds of one repository across processes.
pub(crate) const LOCK_FILE: &str = ".build.lock";

/// Takes the repository directory's build lock (blocking); released when the file drops.
pub(crate) fn lock_repo_dir(repo_dir: &Path) -> Result<std::fs::File, SearchError> {
    std::fs::create_dir_all(repo_dir)
        .map_err(|e| SearchError::io("creating an index directory", e))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(repo_dir.join(LOCK_FILE))
        .map_err(|e| SearchError::io("opening the index build lock", e))?;
    file.lock()
        .map_err(|e| SearchError::io("taking the index build lock", e))?;
    Ok(file)
}

/// Whether no process is building in `repo_dir` now (its lock is free).
pub(crate) fn repo_dir_idle(repo_dir: &Path) -> bool {
    match std::fs::File::open(repo_dir.join(LOCK_FILE)) {
        Ok(file) => file.try_lock_shared().is_ok(),
        Err(_) => true,
    }
}

/// The number of a `gen-<n>` or `staging-<n>-<pid>` directory name with `prefix`.
pub(crate) fn generation_number(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}
