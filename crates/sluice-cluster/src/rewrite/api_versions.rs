//! ApiVersions: what Sluice tells a client it may send.
//!
//! A request may reach any broker, so an API version is offered only if every
//! broker supports it and Sluice can route (and, where needed, rewrite) it:
//! for each API, min = the largest of the mins and max = the smallest of the
//! maxes across the brokers and Sluice's own range. Sluice's range comes from
//! the caller; [`codec_versions`] (everything the codec can decode) is the
//! usual choice, so old clients keep every old version the brokers still
//! accept. APIs that are empty after the intersection, missing on some broker,
//! unknown to the codec, or not client-facing ([`crate::api::describe`]) are dropped.
//!
//! Feature levels (`supported_features`, `finalized_features`, their epoch)
//! are copied from the first broker: clients decide on protocol behaviour
//! from them (transactions v2 needs `transaction.version` finalized at 2).

use sluice_codec::kafka_protocol::messages::ApiKey;
use sluice_codec::kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse,
};
use sluice_codec::kafka_protocol::protocol::VersionRange;

/// Every version the codec can decode: the widest range Sluice could offer.
pub fn codec_versions(api: ApiKey) -> Option<VersionRange> {
    Some(api.valid_versions())
}

/// The ApiVersions response Sluice gives clients, from the brokers' own
/// responses (see the module docs for the rule).
///
/// Only successful responses (error code 0) are used. The first of them
/// supplies `throttle_time_ms` and the feature fields; `api_keys` keep its
/// order. If no response succeeded, the first response is returned as is
/// (carrying its error), or an empty success when there is none at all.
pub fn intersect_api_versions(
    broker_versions: &[ApiVersionsResponse],
    sluice_supported: impl Fn(ApiKey) -> Option<VersionRange>,
) -> ApiVersionsResponse {
    let ok: Vec<&ApiVersionsResponse> = broker_versions
        .iter()
        .filter(|r| r.error_code == 0)
        .collect();
    let Some(first) = ok.first() else {
        return broker_versions.first().cloned().unwrap_or_default();
    };
    let api_keys = first
        .api_keys
        .iter()
        .filter_map(|entry| {
            let api = ApiKey::try_from(entry.api_key).ok()?;
            if !crate::api::describe(api).is_client_facing() {
                return None;
            }
            let mut range = sluice_supported(api)?;
            for resp in &ok {
                let theirs = resp.api_keys.iter().find(|a| a.api_key == entry.api_key)?;
                range = range.intersect(&VersionRange {
                    min: theirs.min_version,
                    max: theirs.max_version,
                });
            }
            (!range.is_empty()).then(|| {
                ApiVersion::default()
                    .with_api_key(entry.api_key)
                    .with_min_version(range.min)
                    .with_max_version(range.max)
            })
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(api_keys)
        .with_throttle_time_ms(first.throttle_time_ms)
        .with_supported_features(first.supported_features.clone())
        .with_finalized_features_epoch(first.finalized_features_epoch)
        .with_finalized_features(first.finalized_features.clone())
}
