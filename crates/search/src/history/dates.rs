//! Dates of commit and diff searches: `since`/`until` parsed from `YYYY-MM-DD` or RFC 3339,
//! and author dates written as RFC 3339 with their recorded offset.

use super::HistoryError;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day count since 1970-01-01 (`civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// RFC 3339 of `seconds` since the epoch shown at `offset` seconds east of UTC, as git's
/// `%aI` prints it (`2024-01-31T12:00:00+01:00`, `Z` never used).
pub(crate) fn rfc3339(seconds: i64, offset: i32) -> String {
    let local = seconds + i64::from(offset);
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let sign = if offset < 0 { '-' } else { '+' };
    let off = offset.unsigned_abs();
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        off / 3600,
        off % 3600 / 60
    )
}

/// Which bound a date is: a bare day means its first second for `since` and its last for
/// `until`.
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    Since,
    Until,
}

fn number(text: &str) -> Option<i64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Seconds since the epoch of a `since`/`until` value: `YYYY-MM-DD` (a UTC day, whole) or
/// RFC 3339 (`2024-01-31T12:00:00Z`, `…+02:00`, fractions ignored).
pub(crate) fn parse(field: &'static str, value: &str, bound: Bound) -> Result<i64, HistoryError> {
    let bad = || HistoryError::InvalidDate {
        field,
        value: value.chars().take(64).collect(),
    };
    let value = value.trim();
    let (date, time) = match value.find(['T', 't', ' ']) {
        Some(at) => (&value[..at], Some(&value[at + 1..])),
        None => (value, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let (y, m, d) = (
        number(y).ok_or_else(bad)?,
        number(m).ok_or_else(bad)?,
        number(d).ok_or_else(bad)?,
    );
    let days_in_month = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if !(1..=9999).contains(&y) || d < 1 || d > days_in_month {
        return Err(bad());
    }
    let day = days_from_civil(y, m, d) * 86_400;
    let Some(time) = time else {
        return Ok(match bound {
            Bound::Since => day,
            Bound::Until => day + 86_399,
        });
    };
    // HH:MM:SS[.frac](Z|±HH:MM)
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-']).ok_or_else(bad)?;
        let (h, m) = time[at + 1..].split_once(':').ok_or_else(bad)?;
        let (h, m) = (number(h).ok_or_else(bad)?, number(m).ok_or_else(bad)?);
        if h > 23 || m > 59 {
            return Err(bad());
        }
        let sign = if time.as_bytes()[at] == b'-' { -1 } else { 1 };
        (&time[..at], sign * (h * 3600 + m * 60))
    };
    let clock = clock.split('.').next().unwrap_or_default();
    let mut hms = clock.split(':');
    let (Some(h), Some(mi), Some(s), None) = (hms.next(), hms.next(), hms.next(), hms.next())
    else {
        return Err(bad());
    };
    let (h, mi, s) = (
        number(h).ok_or_else(bad)?,
        number(mi).ok_or_else(bad)?,
        number(s).ok_or_else(bad)?,
    );
    if h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    Ok(day + h * 3600 + mi * 60 + s - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_forms() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(1_700_000_000, 3600), "2023-11-14T23:13:20+01:00");
        assert_eq!(rfc3339(1_700_000_000, -5400), "2023-11-14T20:43:20-01:30");
        assert_eq!(
            parse("since", "2023-11-14", Bound::Since).unwrap(),
            1_699_920_000
        );
        assert_eq!(
            parse("until", "2023-11-14", Bound::Until).unwrap(),
            1_699_920_000 + 86_399
        );
        assert_eq!(
            parse("since", "2023-11-14T23:13:20+01:00", Bound::Since).unwrap(),
            1_700_000_000
        );
        assert_eq!(
            parse("since", "2023-11-14T22:13:20.5Z", Bound::Since).unwrap(),
            1_700_000_000
        );
        for bad in [
            "yesterday",
            "2023-13-01",
            "2023-02-30",
            "2023-11-14T25:00:00Z",
            "",
        ] {
            assert!(parse("since", bad, Bound::Since).is_err(), "{bad}");
        }
    }
}
