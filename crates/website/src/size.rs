//! Sizes as people read them on the site's pages.

/// A size as people read it, in SI units (1 KB = 1,000 bytes, as `ls --si` and GitHub):
/// `532 B`, `1.2 KB`, `48.3 KB`, `780 KB`, `1.4 MB`; one decimal below 100 of a unit.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    // Move up while the value would print as 1000 or more (999.96 KB prints "1000 KB").
    while value.round() >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if (value * 10.0).round() < 1000.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34 point 7: sizes in SI units, one decimal below 100 of a unit.
    #[test]
    fn sizes_are_human_readable() {
        for (bytes, shown) in [
            (0, "0 B"),
            (999, "999 B"),
            (1000, "1.0 KB"),
            (1234, "1.2 KB"),
            (48_349, "48.3 KB"),
            (99_949, "99.9 KB"),
            (99_950, "100 KB"),
            (780_123, "780 KB"),
            (999_499, "999 KB"),
            (999_600, "1.0 MB"),
            (1_400_000, "1.4 MB"),
            (5_000_000_000, "5.0 GB"),
            (u64::MAX, "18.4 EB"),
        ] {
            assert_eq!(human_size(bytes), shown, "{bytes}");
        }
    }
}
