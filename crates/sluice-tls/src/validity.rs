//! When a certificate expires: its `notAfter`, read from the DER.
//!
//! A reload refuses a certificate that has already expired, and the expiry
//! of each certificate in use is exported as a gauge so that operators can
//! alert before it comes. Only this one field is needed: the DER walk is
//! [`super::der`]'s, and a time is a UTCTime (`YYMMDDHHMMSSZ`) or a
//! GeneralizedTime (`YYYYMMDDHHMMSSZ`). Bad input yields `None`, never a
//! panic.

use crate::der::{SEQUENCE, TbsField, tbs_field, tlv};

/// DER tag of UTCTime.
const UTC_TIME: u8 = 0x17;
/// DER tag of GeneralizedTime.
const GENERALIZED_TIME: u8 = 0x18;

/// The certificate's `notAfter`, in seconds since the Unix epoch.
pub(crate) fn not_after_unix_secs(cert_der: &[u8]) -> Option<i64> {
    let (SEQUENCE, validity) = tbs_field(cert_der, TbsField::Validity)? else {
        return None;
    };
    let (_, _, after_not_before) = tlv(validity)?;
    let (tag, value, _) = tlv(after_not_before)?;
    let text = std::str::from_utf8(value).ok()?;
    match tag {
        UTC_TIME => {
            let yy: i64 = digits(text, 0, 2)?;
            let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
            unix_secs(year, &text[2..])
        }
        GENERALIZED_TIME => unix_secs(digits(text, 0, 4)?, &text[4..]),
        _ => None,
    }
}

/// Seconds since the epoch of `year` and `MMDDHHMMSSZ`.
fn unix_secs(year: i64, rest: &str) -> Option<i64> {
    if rest.len() != 11 || !rest.ends_with('Z') {
        return None;
    }
    let month = digits(rest, 0, 2)?;
    let day = digits(rest, 2, 4)?;
    let (hour, minute, second) = (
        digits(rest, 4, 6)?,
        digits(rest, 6, 8)?,
        digits(rest, 8, 10)?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// The decimal number in `text[from..to]`.
fn digits(text: &str, from: usize, to: usize) -> Option<i64> {
    let part = text.get(from..to)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair, date_time_ymd};

    fn cert_expiring(year: i32, month: u8, day: u8) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(year, month, day);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_utc_and_generalized_times() {
        // 2030-06-15 is a UTCTime; 2099-12-31 (after 2049) a GeneralizedTime.
        assert_eq!(
            not_after_unix_secs(&cert_expiring(2030, 6, 15)),
            Some(1_907_712_000)
        );
        assert_eq!(
            not_after_unix_secs(&cert_expiring(2099, 12, 31)),
            Some(4_102_358_400)
        );
        assert_eq!(
            not_after_unix_secs(&cert_expiring(2021, 3, 1)),
            Some(1_614_556_800)
        );
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(not_after_unix_secs(b""), None);
        assert_eq!(not_after_unix_secs(&[0x30, 0x82, 0xff]), None);
        let mut cert = cert_expiring(2030, 6, 15);
        for cut in [1, 10, 100, cert.len() / 2] {
            assert_eq!(not_after_unix_secs(&cert[..cut]), None, "cut at {cut}");
        }
        cert[0] = 0x31;
        assert_eq!(not_after_unix_secs(&cert), None);
    }
}
