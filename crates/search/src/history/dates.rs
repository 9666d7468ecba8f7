//! Dates of commit and diff searches: `since`/`until` parsed from `YYYY-MM-DD` or RFC 3339,
//! and author dates written as RFC 3339 with their recorded offset.

use super::HistoryError;
use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::{Offset, TimeZone};

/// RFC 3339 of `seconds` since the epoch shown at `offset` seconds east of UTC, as git's
/// `%aI` prints it (`2024-01-31T12:00:00+01:00`, `Z` never used). A value git could not have
/// recorded (out of range) is shown as the epoch, in UTC.
pub(crate) fn rfc3339(seconds: i64, offset: i32) -> String {
    let offset = Offset::from_seconds(offset).unwrap_or(Offset::UTC);
    let at = Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH);
    at.to_zoned_datetime(offset.to_time_zone())
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

/// Which bound a date is: a bare day means its first second for `since` and its last for
/// `until`.
#[derive(Clone, Copy)]
pub(crate) enum Bound {
    Since,
    Until,
}

/// Seconds since the epoch of a `since`/`until` value: `YYYY-MM-DD` (a UTC day, whole) or
/// RFC 3339 (`2024-01-31T12:00:00Z`, `…+02:00`, fractions ignored).
pub(crate) fn parse(field: &'static str, value: &str, bound: Bound) -> Result<i64, HistoryError> {
    let bad = || HistoryError::InvalidDate {
        field,
        value: value.chars().take(64).collect(),
    };
    let value = value.trim();
    if value.len() == "YYYY-MM-DD".len() {
        let day: Date = value.parse().map_err(|_| bad())?;
        let time = match bound {
            Bound::Since => day.to_datetime(jiff::civil::time(0, 0, 0, 0)),
            Bound::Until => day.to_datetime(jiff::civil::time(23, 59, 59, 0)),
        };
        return TimeZone::UTC
            .to_timestamp(time)
            .map(Timestamp::as_second)
            .map_err(|_| bad());
    }
    let at: Timestamp = value.parse().map_err(|_| bad())?;
    Ok(at.as_second())
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
