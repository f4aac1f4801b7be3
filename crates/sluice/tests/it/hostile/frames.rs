//! Cases about bytes: truncated frames, bad lengths, unknown apis and
//! versions, garbage bodies, TLS garbage.

use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::error::ResponseError;
use sluice_codec::{ApiKey, RequestKind, ResponseKind};
use sluice_testkit::raw::{self, RawClient};
use sluice_testkit::wait;

use super::front::{Bystander, Front, api_versions, api_versions_request, closes, closes_tls};

/// A length prefix that promises more than is sent, then FIN; and a
/// complete frame too short for a request header.
pub(crate) fn truncated_frames(front: &Front) {
    let case = "truncated frame";
    let mut bystander = Bystander::connect(&front.plain);
    let mut offender = RawClient::connect(&front.plain);
    let addr = offender.local_addr();
    let mut start = 100i32.to_be_bytes().to_vec();
    start.extend_from_slice(&[1; 10]);
    offender.write_raw(&start).unwrap();
    offender.shutdown_write().unwrap();
    if offender.closed_by_peer_within(Duration::from_secs(20)) {
        // The client left; its close is logged at debug, the cut frame too.
        front.expect_close_line(case, &addr, "closed by the client");
        let cut = format!("client {addr} (conn ");
        let log = front.log();
        let detail = log.lines().any(|l| {
            l.contains(&cut) && l.contains("closed in the middle of a frame (14 bytes unread)")
        });
        if !detail {
            front.found(case, "the cut frame is not logged".to_owned());
        }
    } else {
        front.found(
            case,
            "Sluice did not close its side after the FIN".to_owned(),
        );
    }
    bystander.assert_served(case);

    closes(
        front,
        "frame shorter than its header",
        "truncated request header",
        |c| c.write_raw(&[0, 0, 0, 3, 0, 3, 0]).unwrap(),
    );
}

/// Negative and oversized length prefixes are refused on the prefix.
pub(crate) fn bad_lengths(front: &Front) {
    for len in [-1i32, i32::MIN] {
        closes(
            front,
            "negative length",
            &format!("invalid negative frame length {len}"),
            |c| c.write_raw(&len.to_be_bytes()).unwrap(),
        );
    }
    closes(
        front,
        "oversized length",
        "frame of 2147483647 bytes exceeds the limit of 104857600 bytes",
        |c| {
            let mut start = i32::MAX.to_be_bytes().to_vec();
            start.extend_from_slice(&[0; 1024]);
            c.write_raw(&start).unwrap();
        },
    );
}

/// Unknown api keys close the connection (as Kafka does); ApiVersions of a
/// version Sluice does not support is answered with UNSUPPORTED_VERSION and
/// its range (as Kafka does) and the connection stays usable; a request of
/// another api at a version Sluice does not offer closes the connection,
/// as Kafka does, with one line naming the version.
pub(crate) fn unknown_apis_and_versions(front: &Front) {
    for key in [9999i16, -1] {
        closes(
            front,
            "unknown api key",
            &format!("unknown api key {key}"),
            |c| c.write_raw(&raw::frame(key, 0, 1, false, &[])).unwrap(),
        );
    }

    // ApiVersions v127: a v0 answer, error 35, ApiVersions' own range.
    let mut client = RawClient::connect(&front.plain);
    let request = raw::frame(ApiKey::ApiVersions as i16, 127, 7, true, &[0, 0, 0]);
    client.write_raw(&request).unwrap();
    let answer = client.recv(ApiKey::ApiVersions, 0);
    assert_eq!(answer.correlation_id(), 7);
    let ResponseKind::ApiVersions(body) = answer.into_body().unwrap() else {
        panic!("not an ApiVersions answer")
    };
    assert_eq!(
        body.error_code,
        ResponseError::UnsupportedVersion.code(),
        "UNSUPPORTED_VERSION: {body:?}"
    );
    let own: Vec<_> = body
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert_eq!(own, [(ApiKey::ApiVersions as i16, 0, 4)], "{body:?}");
    api_versions(&mut client);

    for api in [ApiKey::Metadata, ApiKey::Produce, ApiKey::Fetch] {
        closes(front, &format!("{api:?} v99"), "v99", |c| {
            c.write_raw(&raw::frame(api as i16, 99, 1, true, &[0; 16]))
                .unwrap()
        });
    }
}

/// Valid headers with bodies that are not what they claim.
pub(crate) fn garbage_bodies(front: &Front) {
    // Deterministic noise (xorshift), so a failure can be replayed.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..256)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    for (api, version) in [(ApiKey::Produce, 9), (ApiKey::Fetch, 12)] {
        closes(
            front,
            &format!("garbage {api:?} body"),
            &format!("cannot decode {api:?} v{version} request"),
            |c| {
                c.write_raw(&raw::frame(api as i16, version, 1, true, &noise))
                    .unwrap()
            },
        );
    }
    // A Produce whose topic array claims 2^31 - 2 entries in 5 bytes.
    let mut huge = vec![0]; // transactional_id: null (compact)
    huge.extend_from_slice(&1i16.to_be_bytes()); // acks
    huge.extend_from_slice(&30_000i32.to_be_bytes()); // timeout
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // topics
    closes(
        front,
        "huge array count",
        "cannot decode Produce v9 request",
        |c| {
            c.write_raw(&raw::frame(ApiKey::Produce as i16, 9, 1, true, &huge))
                .unwrap()
        },
    );
}

/// Bytes that are not TLS on the TLS source, and half a ClientHello held
/// open; after each a new TLS client is served.
pub(crate) fn tls_garbage(front: &Front, ca: &str) {
    let rejected = || {
        front.sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"tls\""],
        )
    };
    let before = rejected();
    // A plaintext Kafka request where a ClientHello belongs.
    let body = RequestKind::ApiVersions(api_versions_request());
    let plain_request = raw::encode(ApiKey::ApiVersions, 3, 1, body);
    if let Some(line) = closes_tls(front, ca, "plaintext on TLS", |c| {
        c.write_raw(&plain_request).unwrap()
    }) && !line.contains(" INFO ")
    {
        front.found("plaintext on TLS", format!("not at info: {line}"));
    }
    // A TLS record header (handshake, TLS 1.0) with a garbage body.
    let mut record = vec![0x16, 0x03, 0x01, 0x00, 0x40];
    record.extend_from_slice(&[0xab; 0x40]);
    closes_tls(front, ca, "garbage TLS record", |c| {
        c.write_raw(&record).unwrap()
    });
    // Half a ClientHello, held: the handshake deadline (10 s) closes it.
    let started = Instant::now();
    closes_tls(front, ca, "half a ClientHello", |c| {
        c.write_raw(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap()
    });
    if started.elapsed() < Duration::from_secs(9) {
        front.found(
            "half a ClientHello",
            format!(
                "closed after {:?}, before the 10 s handshake deadline",
                started.elapsed()
            ),
        );
    }
    let counted = wait::within(Duration::from_secs(10), || {
        let counted = rejected() - before;
        (counted >= 3.0).then_some(()).ok_or(format!("{counted}"))
    });
    if let Err(counted) = counted {
        front.found("TLS garbage", format!("{counted} of 3 rejections counted"));
    }
}
