//! A bounds-checked walk over the DER of an X.509 certificate, for the two
//! fields Sluice reads from certificates: a client's subject CN
//! (`sluice-source`'s principal) and a certificate's `notAfter`
//! (`validity`). Both need only the TLV layer, so this stands in for a full
//! X.509 parser: `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0]
//! version OPTIONAL, serialNumber, signature, issuer, validity, subject, ..
//! }, .. }`. Bad input yields `None`, never a panic.

/// DER tag of a SEQUENCE.
pub const SEQUENCE: u8 = 0x30;
/// DER tag of a SET.
pub const SET: u8 = 0x31;
/// DER tag of an OBJECT IDENTIFIER.
pub const OID: u8 = 0x06;
/// Context tag `[0]` of tbsCertificate's optional version.
const VERSION: u8 = 0xa0;

/// A field of tbsCertificate, by position after the optional version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TbsField {
    /// `validity SEQUENCE { notBefore, notAfter }`.
    Validity = 3,
    /// `subject Name`.
    Subject = 4,
}

/// The tag and content of `field` of the certificate's tbsCertificate.
pub fn tbs_field(cert_der: &[u8], field: TbsField) -> Option<(u8, &[u8])> {
    let (certificate, _) = expect(cert_der, SEQUENCE)?;
    let (tbs, _) = expect(certificate, SEQUENCE)?;
    let mut rest = tbs;
    if let Some((VERSION, _, after)) = tlv(rest) {
        rest = after;
    }
    // serialNumber, signature, issuer (and validity): skipped unread.
    for _ in 0..field as usize {
        let (_, _, after) = tlv(rest)?;
        rest = after;
    }
    let (tag, content, _) = tlv(rest)?;
    Some((tag, content))
}

/// Reads one element that must have `tag`; returns its content and the rest.
pub fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    match tlv(input)? {
        (t, content, rest) if t == tag => Some((content, rest)),
        _ => None,
    }
}

/// Reads one DER element: `(tag, content, rest)`. Only single-byte tags and
/// definite lengths of at most four bytes, which is all a certificate needs.
pub fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut input) = input.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, after) = (input.get(..n)?, input.get(n..)?);
        input = after;
        bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    let content = input.get(..len)?;
    Some((tag, content, input.get(len..)?))
}
