//! The subject common name (CN) of a client certificate.
//!
//! mTLS clients are identified by their certificate's CN, the way Kafka's
//! `ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/` does it. Only the
//! subject is needed: the DER walk is `sluice_tls::der`'s. It runs on
//! a certificate that rustls has already verified; bad input yields `None`,
//! never a panic.

use sluice_tls::der::{OID, SEQUENCE, SET, TbsField, expect, tbs_field, tlv};

/// The encoded OID 2.5.4.3 (id-at-commonName).
const COMMON_NAME_OID: &[u8] = &[0x55, 0x04, 0x03];

/// Returns the subject CN of a DER certificate.
///
/// When the subject holds several CNs this returns the last one in DER order,
/// which is the first one in the RFC 2253 string that Kafka's principal
/// mapping rules match against.
pub(crate) fn subject_common_name(cert_der: &[u8]) -> Option<String> {
    let (SEQUENCE, subject) = tbs_field(cert_der, TbsField::Subject)? else {
        return None;
    };
    common_name_in(subject)
}

/// Finds the last CN in the RDN sequence of a `Name`.
fn common_name_in(mut rdns: &[u8]) -> Option<String> {
    let mut found = None;
    while !rdns.is_empty() {
        let (mut set, after) = expect(rdns, SET)?;
        rdns = after;
        while !set.is_empty() {
            let (attribute, after) = expect(set, SEQUENCE)?;
            set = after;
            let (oid, value) = expect(attribute, OID)?;
            if oid == COMMON_NAME_OID {
                let (tag, content, _) = tlv(value)?;
                found = Some(decode_string(tag, content)?);
            }
        }
    }
    found
}

/// Decodes the string types X.509 names use.
fn decode_string(tag: u8, content: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, VisibleString.
        0x0c | 0x13 | 0x16 | 0x1a => String::from_utf8(content.to_vec()).ok(),
        // TeletexString: in practice Latin-1.
        0x14 => Some(content.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UTF-16BE.
        0x1e => {
            if !content.len().is_multiple_of(2) {
                return None;
            }
            let units = content
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
        }
        // UniversalString: UTF-32BE.
        0x1c => {
            if !content.len().is_multiple_of(4) {
                return None;
            }
            content
                .chunks_exact(4)
                .map(|q| char::from_u32(u32::from_be_bytes([q[0], q[1], q[2], q[3]])))
                .collect()
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};

    fn cert_with(dn: DistinguishedName) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.distinguished_name = dn;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_the_cn_among_other_attributes() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "NZ");
        dn.push(DnType::OrganizationName, "Sluice");
        dn.push(DnType::CommonName, "sluice-admin");
        dn.push(DnType::OrganizationalUnitName, "ops");
        assert_eq!(
            subject_common_name(&cert_with(dn)).as_deref(),
            Some("sluice-admin")
        );
    }

    #[test]
    fn decodes_string_types() {
        for value in [
            DnValue::PrintableString("print".try_into().unwrap()),
            DnValue::Ia5String("print".try_into().unwrap()),
            DnValue::BmpString("print".try_into().unwrap()),
            DnValue::Utf8String("print".to_owned()),
        ] {
            let mut dn = DistinguishedName::new();
            dn.push(DnType::CommonName, value);
            assert_eq!(
                subject_common_name(&cert_with(dn)).as_deref(),
                Some("print")
            );
        }
    }

    #[test]
    fn no_cn_and_garbage_yield_none() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "Sluice");
        assert_eq!(subject_common_name(&cert_with(dn)), None);
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "x");
        let good = cert_with(dn);
        assert_eq!(subject_common_name(&good).as_deref(), Some("x"));
        for cut in 0..good.len() {
            assert_eq!(subject_common_name(&good[..cut]), None, "cut at {cut}");
        }
        for at in 0..good.len() {
            // A corrupted byte anywhere must not panic.
            let mut bad = good.clone();
            bad[at] ^= 0xff;
            let _ = subject_common_name(&bad);
        }
        assert_eq!(subject_common_name(&[]), None);
        assert_eq!(
            subject_common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(subject_common_name(&[0x30, 0x80, 0x00, 0x00]), None);
    }
}
