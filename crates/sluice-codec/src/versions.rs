//! The API versions Sluice decodes, and where each turns flexible.
//!
//! Sluice forwards any request it can frame, but it decodes (to route, split,
//! merge or rewrite) only the APIs below, so only those need a body codec. The
//! ranges are what `kafka-protocol` can decode on both sides (request and
//! response); the ApiVersions rewrite should clamp a broker's advertised
//! ranges to them, and the codec tests walk every one of them at its minimum,
//! first flexible and maximum version. A test checks the table against
//! `kafka-protocol`, so a dependency bump that moves a range fails loudly
//! instead of shifting what Sluice advertises.
//!
//! Note: `ApiKey::valid_versions()` overstates InitProducerId (v6: Kafka's
//! spec lists a version it marks unstable, which the generator leaves out of
//! the bodies); the table uses the decodable maximum. The APIs in [`CAPPED`] are decoded below
//! that maximum on purpose.

use kafka_protocol::messages::ApiKey;

/// The versions of one API that Sluice decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest version decoded.
    pub min: i16,
    /// Highest version decoded.
    pub max: i16,
    /// First version with compact strings, tagged fields and request header
    /// v2, if any version is flexible.
    pub first_flexible: Option<i16>,
}

impl ApiVersionRange {
    /// Whether `version` is in the range.
    pub fn contains(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

const fn row(api_key: ApiKey, min: i16, max: i16, first_flexible: Option<i16>) -> ApiVersionRange {
    ApiVersionRange {
        api_key,
        min,
        max,
        first_flexible,
    }
}

/// Every API that Sluice decodes, with its versions.
pub const DECODED: &[ApiVersionRange] = &[
    row(ApiKey::Produce, 3, 13, Some(9)),
    row(ApiKey::Fetch, 4, 18, Some(12)),
    row(ApiKey::ListOffsets, 1, 11, Some(6)),
    row(ApiKey::Metadata, 0, 13, Some(9)),
    row(ApiKey::OffsetCommit, 2, 10, Some(8)),
    row(ApiKey::OffsetFetch, 1, 10, Some(6)),
    row(ApiKey::FindCoordinator, 0, 6, Some(3)),
    row(ApiKey::JoinGroup, 0, 9, Some(6)),
    row(ApiKey::Heartbeat, 0, 4, Some(4)),
    row(ApiKey::LeaveGroup, 0, 5, Some(4)),
    row(ApiKey::SyncGroup, 0, 5, Some(4)),
    row(ApiKey::DescribeGroups, 0, 6, Some(5)),
    row(ApiKey::ListGroups, 0, 5, Some(3)),
    row(ApiKey::SaslHandshake, 0, 1, None),
    row(ApiKey::ApiVersions, 0, 4, Some(3)),
    row(ApiKey::CreateTopics, 2, 7, Some(5)),
    row(ApiKey::DeleteTopics, 1, 6, Some(4)),
    row(ApiKey::DeleteRecords, 0, 2, Some(2)),
    row(ApiKey::InitProducerId, 0, 5, Some(2)),
    row(ApiKey::OffsetForLeaderEpoch, 2, 4, Some(4)),
    row(ApiKey::AddPartitionsToTxn, 0, 5, Some(3)),
    row(ApiKey::AddOffsetsToTxn, 0, 4, Some(3)),
    row(ApiKey::EndTxn, 0, 5, Some(3)),
    row(ApiKey::TxnOffsetCommit, 0, 6, Some(3)),
    row(ApiKey::DescribeConfigs, 1, 4, Some(4)),
    row(ApiKey::SaslAuthenticate, 0, 2, Some(2)),
    row(ApiKey::CreateDelegationToken, 1, 3, Some(2)),
    row(ApiKey::RenewDelegationToken, 1, 2, Some(2)),
    row(ApiKey::ExpireDelegationToken, 1, 2, Some(2)),
    row(ApiKey::DescribeDelegationToken, 1, 3, Some(2)),
    row(ApiKey::DescribeCluster, 0, 2, Some(0)),
    row(ApiKey::ConsumerGroupHeartbeat, 0, 1, Some(0)),
    row(ApiKey::ConsumerGroupDescribe, 0, 1, Some(0)),
];

/// APIs whose row in [`DECODED`] stops below what `kafka-protocol` decodes,
/// and why: a newer version means something a proxy cannot pass on.
pub const CAPPED: &[(ApiKey, &str)] = &[(
    ApiKey::ApiVersions,
    "v5 (KIP-1242) carries the cluster and node id the client means to reach, which a \
     broker checks against its own: through Sluice that is a Sluice node id",
)];

/// The versions Sluice decodes for `api_key`, if it decodes that API at all.
pub fn decoded(api_key: ApiKey) -> Option<&'static ApiVersionRange> {
    DECODED.iter().find(|r| r.api_key == api_key)
}

/// The first flexible version of any API `kafka-protocol` knows, from its
/// request header versions (flexible versions use request header v2): the
/// oracle the table is checked against.
#[cfg(test)]
fn first_flexible(api_key: ApiKey) -> Option<i16> {
    let range = api_key.valid_versions();
    (range.min..=range.max).find(|v| api_key.request_header_version(*v) >= 2)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_kafka_protocol() {
        for row in DECODED {
            let both = crate::guard::decodable_versions(row.api_key);
            if CAPPED.iter().any(|(api, _)| *api == row.api_key) {
                let (min, max) = both.unwrap();
                assert!(row.min == min && row.max < max, "{:?}", row.api_key);
            } else {
                assert_eq!(Some((row.min, row.max)), both, "{:?}", row.api_key);
            }
            assert_eq!(
                row.first_flexible,
                first_flexible(row.api_key),
                "{:?}",
                row.api_key
            );
        }
    }

    #[test]
    fn lookups() {
        let produce = decoded(ApiKey::Produce).unwrap();
        assert!(produce.contains(3) && produce.contains(13) && !produce.contains(2));
        assert!(decoded(ApiKey::WriteTxnMarkers).is_none());
        // kafka-protocol claims more than it decodes for these.
        assert_eq!(ApiKey::InitProducerId.valid_versions().max, 6);
        assert_eq!(decoded(ApiKey::InitProducerId).unwrap().max, 5);
    }
}
