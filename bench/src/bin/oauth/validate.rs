//! The validation alone: `oauth::Validator::validate` in this process (signature and claims;
//! no HTTP, no user lookup), the share of a JWT call's server CPU that is the token's own.

use anyhow::{Result, bail};
use std::time::{Duration, Instant};

/// This thread's CPU time, µs (`CLOCK_THREAD_CPUTIME_ID`): the runtime has one thread, and
/// validating a token with known keys does no I/O.
fn thread_cpu_us() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec passed, which lives on this stack.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3
}

/// CPU µs per `validate` of each token, `calls` times each after a tenth as many untimed.
pub(super) async fn validation_us(
    issuer: &str,
    audience: &str,
    tokens: &[&str],
    calls: usize,
) -> Result<Vec<f64>> {
    let validator = oauth::Validator::new(oauth::OAuthConfig {
        issuer: issuer.to_owned(),
        audience: audience.to_owned(),
        groups_claim: "groups".to_owned(),
    })?;
    validator.start();
    // The keys are fetched in the background: "unavailable" until then.
    let deadline = Instant::now() + Duration::from_secs(30);
    for token in tokens {
        while let Err(error) = validator.validate(token).await {
            if !matches!(error, oauth::TokenError::KeysUnavailable) || Instant::now() > deadline {
                bail!("in process, a valid token was refused: {error}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut figures = Vec::new();
    for token in tokens {
        for _ in 0..calls / 10 {
            validator.validate(token).await?;
        }
        let before = thread_cpu_us();
        for _ in 0..calls {
            validator.validate(token).await?;
        }
        figures.push((thread_cpu_us() - before) / calls as f64);
    }
    Ok(figures)
}
