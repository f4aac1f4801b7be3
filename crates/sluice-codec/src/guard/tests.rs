//! Unit tests for the pre-decode walk, including a differential check of the
//! generated schema against `kafka-protocol`'s decoders for every API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::*;

#[test]
fn huge_array_counts_are_rejected_before_decoding() {
    // Metadata v0: a topics array of i32::MAX elements in a 4-byte body.
    let err = check_request_body(ApiKey::Metadata, 0, &[0x7f, 0xff, 0xff, 0xff]).unwrap_err();
    assert!(err.to_string().contains("cannot fit"), "{err}");
    // Metadata v12: a compact array of u32::MAX - 1 elements.
    let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0];
    let err = check_request_body(ApiKey::Metadata, 12, &body).unwrap_err();
    assert!(err.to_string().contains("cannot fit"), "{err}");
}

#[test]
fn varints_longer_than_32_bits_are_rejected() {
    // Metadata v12 whose topic count varint has a sixth byte.
    let body = [0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert!(check_request_body(ApiKey::Metadata, 12, &body).is_err());
    // A fifth byte with bits above the 32nd.
    let body = [0x80, 0x80, 0x80, 0x80, 0x10];
    assert!(check_request_body(ApiKey::Metadata, 12, &body).is_err());
}

#[test]
fn counts_that_fit_but_reserve_too_much_are_rejected() {
    // Metadata v0 with 300M one-byte... cannot exist: each topic is at least
    // two bytes. Instead check the budget arithmetic directly.
    let mut walk = Walk {
        cur: Cursor::new(&[0u8; 64], "test"),
        version: 0,
        reserved: MAX_DECODE_RESERVATION - 10,
    };
    let err = walk.elements(&Ty::Fixed(0), 2, 8, 0).unwrap_err();
    assert!(err.contains("reserve"), "{err}");
}

#[test]
fn fixed_size_elements_are_skipped_whole_and_must_all_be_there() {
    let walk_over = |bytes: &'static [u8]| Walk {
        cur: Cursor::new(bytes, "test"),
        version: 0,
        reserved: 0,
    };
    // Three i32s in 13 bytes: exactly 12 read.
    let mut walk = walk_over(&[0u8; 13]);
    walk.elements(&Ty::Fixed(4), 3, 4, 0).unwrap();
    assert_eq!(walk.cur.pos, 12);
    assert_eq!(walk.reserved, 12);
    // Three i32s announced, 11 bytes there: the count fits, the elements
    // do not.
    let mut walk = walk_over(&[0u8; 11]);
    assert!(walk.elements(&Ty::Fixed(4), 3, 4, 0).is_err());
}

#[test]
fn valid_versions_out_of_range_are_left_to_the_decoder() {
    assert_eq!(
        check_request_body(ApiKey::Produce, 2, &[0xff; 8]).unwrap(),
        0
    );
    assert_eq!(
        check_request_body(ApiKey::Produce, 99, &[0xff; 8]).unwrap(),
        0
    );
}

#[test]
fn every_api_key_has_a_schema() {
    for key in ApiKey::iter() {
        assert!(schema::request_root(key).is_some(), "{key:?} request");
        assert!(schema::response_root(key).is_some(), "{key:?} response");
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Bytes biased towards the zeros and small numbers that make up most
    /// valid bodies (empty arrays, empty strings, small counts).
    fn body(&mut self) -> Vec<u8> {
        let len = (self.next() % 48) as usize;
        (0..len)
            .map(|_| match self.next() % 10 {
                0..=5 => 0,
                6 => 1,
                7 => 2,
                8 => (self.next() % 8) as u8,
                _ => self.next() as u8,
            })
            .collect()
    }
}

/// Where the decoder accepts a body, the walk must have read exactly the
/// bytes the decoder read; otherwise the schema has drifted from the decoder.
#[test]
fn walk_reads_what_the_decoder_reads_for_every_api() {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let mut agreed = 0usize;
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        for version in range.min..=range.max {
            for _ in 0..150 {
                let body = rng.body();
                if let Ok(walked) = check_request_body(key, version, &body) {
                    let mut bytes = Bytes::from(body.clone());
                    if RequestKind::decode(key, &mut bytes, version).is_ok() {
                        let read = body.len() - bytes.len();
                        assert_eq!(walked, read, "{key:?} v{version} request {body:02x?}");
                        agreed += 1;
                    }
                }
                if let Ok(walked) = check_response_body(key, version, &body) {
                    let mut bytes = Bytes::from(body.clone());
                    if ResponseKind::decode(key, &mut bytes, version).is_ok() {
                        let read = body.len() - bytes.len();
                        assert_eq!(walked, read, "{key:?} v{version} response {body:02x?}");
                        agreed += 1;
                    }
                }
            }
        }
    }
    // Make sure the comparison actually ran on a good share of inputs.
    assert!(agreed > 5_000, "only {agreed} bodies decoded");
}

/// A walk that accepts a body never leaves the decoder room to over-reserve:
/// overwrite every offset of random bodies with hostile counts and decode.
#[test]
fn hostile_counts_at_every_offset_never_reach_the_decoder() {
    let mut rng = Rng(0x5eed_cafe_f00d_0002);
    let hostile: [&[u8]; 3] = [
        &[0x7f, 0xff, 0xff, 0xff],
        &[0xff, 0xff, 0xff, 0xff, 0x0f],
        &[0x10, 0, 0, 0],
    ];
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        for version in [range.min, range.max] {
            let body = rng.body();
            for at in 0..body.len() {
                for pattern in hostile {
                    let mut bad = body.clone();
                    bad.splice(
                        at..(at + pattern.len()).min(bad.len()),
                        pattern.iter().copied(),
                    );
                    if check_request_body(key, version, &bad).is_ok() {
                        let _ = RequestKind::decode(key, &mut Bytes::from(bad.clone()), version);
                    }
                    if check_response_body(key, version, &bad).is_ok() {
                        let _ = ResponseKind::decode(key, &mut Bytes::from(bad), version);
                    }
                }
            }
        }
    }
}
