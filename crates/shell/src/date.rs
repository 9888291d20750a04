//! Java's `Date.toString` (`EEE MMM dd HH:mm:ss zzz yyyy`) in the local
//! time zone, which is how zkCli prints `ctime` and `mtime`.
//!
//! The local time comes from the C library's `localtime_r`, which reads
//! `TZ` and the system's zone files as the JVM does, and names the zone
//! with the same abbreviations for the usual zones ("UTC", "CET",
//! "EDT"). This is the crate's only unsafe code: a time-zone crate would
//! be a large dependency for one line of output.

use std::ffi::CStr;

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A broken-down local time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalTime {
    pub year: i64,
    /// 0 = January.
    pub month: usize,
    pub day: u32,
    /// 0 = Sunday.
    pub weekday: usize,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub zone: String,
}

/// `millis` since the epoch as Java's `new Date(millis).toString()`.
pub(crate) fn java_date(millis: i64) -> String {
    format_date(&local_time(millis))
}

pub(crate) fn format_date(t: &LocalTime) -> String {
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} {} {}",
        DAYS[t.weekday % 7],
        MONTHS[t.month % 12],
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.zone,
        t.year
    )
}

/// `millis` in the local zone; in UTC if the C library cannot say.
fn local_time(millis: i64) -> LocalTime {
    // Java floors to the second (a negative time's fraction belongs to the
    // earlier second).
    let seconds = millis.div_euclid(1000);
    // `time_t` is 32 bits on some targets, where this can fail.
    #[allow(irrefutable_let_patterns)]
    let Ok(time) = libc::time_t::try_from(seconds) else {
        return utc(seconds);
    };
    // SAFETY: an all-zero `tm` is a valid value (integers and a null zone
    // pointer); `localtime_r` only writes into the `tm` we pass and reads
    // the `time_t` we own, both alive across the call, and it is the
    // reentrant variant, safe with other threads.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let converted = unsafe { libc::localtime_r(&time, &mut tm) };
    if converted.is_null() {
        return utc(seconds);
    }
    let zone = if tm.tm_zone.is_null() {
        "UTC".to_owned()
    } else {
        // SAFETY: glibc and musl point `tm_zone` at a NUL-terminated name
        // in their time-zone data, which lives as long as the process.
        unsafe { CStr::from_ptr(tm.tm_zone) }
            .to_string_lossy()
            .into_owned()
    };
    LocalTime {
        year: i64::from(tm.tm_year) + 1900,
        month: usize::try_from(tm.tm_mon).unwrap_or(0),
        day: u32::try_from(tm.tm_mday).unwrap_or(1),
        weekday: usize::try_from(tm.tm_wday).unwrap_or(0),
        hour: u32::try_from(tm.tm_hour).unwrap_or(0),
        minute: u32::try_from(tm.tm_min).unwrap_or(0),
        second: u32::try_from(tm.tm_sec).unwrap_or(0),
        zone,
    }
}

/// `seconds` since the epoch in UTC, by the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn utc(seconds: i64) -> LocalTime {
    let days = seconds.div_euclid(86_400);
    let in_day = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    LocalTime {
        year,
        month: usize::try_from(month - 1).unwrap_or(0),
        day: u32::try_from(day).unwrap_or(1),
        // 1970-01-01 was a Thursday.
        weekday: usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0),
        hour: u32::try_from(in_day / 3600).unwrap_or(0),
        minute: u32::try_from(in_day / 60 % 60).unwrap_or(0),
        second: u32::try_from(in_day % 60).unwrap_or(0),
        zone: "UTC".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_java() {
        assert_eq!(format_date(&utc(0)), "Thu Jan 01 00:00:00 UTC 1970");
        // 2026-11-21 11:46:25 UTC, as zkCli printed it against Paddock.
        assert_eq!(
            format_date(&utc(1_795_261_585)),
            "Sat Nov 21 11:46:25 UTC 2026"
        );
        assert_eq!(
            format_date(&utc(951_782_400)),
            "Tue Feb 29 00:00:00 UTC 2000"
        );
        assert_eq!(format_date(&utc(-1)), "Wed Dec 31 23:59:59 UTC 1969");
    }

    #[test]
    fn local_time_agrees_with_utc_when_the_zone_is_utc() {
        let t = local_time(1_795_261_585_123);
        if t.zone == "UTC" || t.zone == "GMT" {
            assert_eq!(
                LocalTime {
                    zone: "UTC".into(),
                    ..t
                },
                utc(1_795_261_585)
            );
        }
        // Whatever the zone, the shape is Java's.
        let text = java_date(0);
        assert_eq!(text.split(' ').count(), 6, "{text}");
    }
}
