//! ApiVersions, Metadata, FindCoordinator and DescribeCluster: the APIs whose
//! answers describe the cluster.
//!
//! Each goes to any broker. The answer is first recorded in the view
//! (Metadata, FindCoordinator) and then rewritten by [`crate::rewrite`] so
//! that only Sluice nodes appear. ApiVersions is the intersection of what
//! every broker supports and what Sluice routes ([`super::offered_versions`]).
//!
//! This module also builds the internal Metadata and FindCoordinator requests
//! the sink sends to fill the view before it routes a request.

use sluice_codec::kafka_protocol::messages::api_versions_response::ApiVersion;
use sluice_codec::kafka_protocol::messages::find_coordinator_response::Coordinator;
use sluice_codec::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use sluice_codec::kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, DescribeClusterResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
    RequestKind, ResponseKind, TopicName,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use super::{BATCHED_FIND_COORDINATOR_VERSION, UNSUPPORTED_VERSION};
use crate::api::failure::FailureAnswer;
use crate::error_codes::ErrorCode;
use crate::rewrite::intersect_api_versions;
use crate::topology::{ClusterView, CoordinatorKeyType, TopicId, TopicRef};

/// The first Metadata version whose topic ids brokers resolve (KIP-516: v10
/// and v11 carry the field but brokers do not look topics up by it).
pub const METADATA_TOPIC_ID_LOOKUP_VERSION: i16 = 12;

/// The key of a FindCoordinator request: its type (v1+; v0 is always a
/// group) and, for v0–3, the one key it asks about (v4+ responses repeat
/// their keys themselves).
pub fn find_coordinator_key(
    request: &FindCoordinatorRequest,
    version: i16,
) -> (Option<CoordinatorKeyType>, Option<StrBytes>) {
    let key_type = CoordinatorKeyType::try_from(request.key_type).ok();
    let key = (version < BATCHED_FIND_COORDINATOR_VERSION).then(|| request.key.clone());
    (key_type, key)
}

/// The ApiVersions answer for a client: the broker's `fresh` answer first
/// (its features and throttle are the ones kept), intersected with every other
/// broker's cached answer and with what Sluice offers.
pub fn client_api_versions(
    fresh: &ApiVersionsResponse,
    others: &[std::sync::Arc<ApiVersionsResponse>],
) -> ApiVersionsResponse {
    let mut all = Vec::with_capacity(others.len() + 1);
    all.push(fresh.clone());
    all.extend(others.iter().map(|r| (**r).clone()));
    intersect_api_versions(&all, super::offered_versions)
}

/// The answer to an ApiVersions request of a version Sluice does not decode:
/// like Kafka, a v0 response with UNSUPPORTED_VERSION that lists the
/// ApiVersions versions Sluice supports, so that the client retries lower.
pub fn unsupported_api_versions() -> ApiVersionsResponse {
    let range = sluice_codec::versions::decoded(ApiKey::ApiVersions);
    let (min, max) = range.map_or((0, 3), |r| (r.min, r.max));
    ApiVersionsResponse::default()
        .with_error_code(UNSUPPORTED_VERSION.code())
        .with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions as i16)
                .with_min_version(min)
                .with_max_version(max),
        ])
}

/// Whether a broker accepts the client software name and version of an
/// ApiVersions request at `version`, as Kafka checks them (v3+; earlier
/// versions have neither): non-empty, letters, digits, `-` and `.`, starting
/// and ending with a letter or digit. A request that fails gets
/// INVALID_REQUEST from the broker, so Sluice never answers it from its cache.
pub fn valid_client_software(request: &ApiVersionsRequest, version: i16) -> bool {
    fn valid(field: &str) -> bool {
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let inner = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        edge(field.chars().next()) && edge(field.chars().last()) && field.chars().all(inner)
    }
    version < 3
        || (valid(request.client_software_name.as_str())
            && valid(request.client_software_version.as_str()))
}

/// Whether Sluice decodes ApiVersions at `version`.
pub fn api_versions_decodable(version: i16) -> bool {
    sluice_codec::versions::decoded(ApiKey::ApiVersions).is_some_and(|r| r.contains(version))
}

/// A Metadata request (at `version`) refreshing `topics`: by name, or by id
/// from v12. `None` for `topics` asks for the brokers only. A topic known
/// only by an id that the broker cannot look up makes it a request for every
/// topic, the only way to learn that id's name.
pub fn metadata_request(
    topics: Option<&[TopicRef]>,
    version: i16,
    view: &ClusterView,
) -> MetadataRequest {
    let base = MetadataRequest::default().with_allow_auto_topic_creation(false);
    let Some(topics) = topics else {
        return base.with_topics(Some(Vec::new()));
    };
    let mut entries: Vec<MetadataRequestTopic> = Vec::with_capacity(topics.len());
    let mut seen_names: Vec<&TopicName> = Vec::new();
    let mut seen_ids: Vec<TopicId> = Vec::new();
    for topic in topics {
        let name = match topic {
            TopicRef::Name(name) => Some(name),
            TopicRef::Id(id) => view.topic_name(*id),
        };
        match (name, topic) {
            (Some(name), _) => {
                if !seen_names.contains(&name) {
                    seen_names.push(name);
                    entries.push(MetadataRequestTopic::default().with_name(Some(name.clone())));
                }
            }
            (None, TopicRef::Id(id)) if version >= METADATA_TOPIC_ID_LOOKUP_VERSION => {
                if !seen_ids.contains(id) {
                    seen_ids.push(*id);
                    entries.push(
                        MetadataRequestTopic::default()
                            .with_topic_id(uuid::Uuid::from_u128(id.0))
                            .with_name(None),
                    );
                }
            }
            (None, _) => return base.with_topics(None),
        }
    }
    base.with_topics(Some(entries))
}

/// The FindCoordinator requests (at `version`) for `keys` of `key_type`: one
/// batched request from v4, else one per key.
pub fn find_coordinator_requests(
    key_type: CoordinatorKeyType,
    keys: &[String],
    version: i16,
) -> Vec<FindCoordinatorRequest> {
    let base = FindCoordinatorRequest::default().with_key_type(key_type.as_i8());
    if version >= BATCHED_FIND_COORDINATOR_VERSION {
        let keys = keys
            .iter()
            .map(|k| StrBytes::from_string(k.clone()))
            .collect();
        return vec![base.with_coordinator_keys(keys)];
    }
    keys.iter()
        .map(|k| base.clone().with_key(StrBytes::from_string(k.clone())))
        .collect()
}

/// The failure answers of the meta APIs: FindCoordinator (per key from
/// v4), DescribeCluster, ApiVersions and Metadata (v13+: the table's
/// `failure_answer_since`).
#[derive(Debug, Clone, Copy)]
pub struct MetaAnswers;

impl FailureAnswer for MetaAnswers {
    fn failure_answer(
        &self,
        _api: ApiKey,
        request: &RequestKind,
        version: i16,
        code: ErrorCode,
    ) -> Option<ResponseKind> {
        error_response(request, version, code)
    }
}

fn error_response(request: &RequestKind, version: i16, code: ErrorCode) -> Option<ResponseKind> {
    let wire = code.code();
    Some(match request {
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator_failed(r, version, code))
        }
        RequestKind::DescribeCluster(_) => ResponseKind::DescribeCluster(
            DescribeClusterResponse::default()
                .with_error_code(wire)
                .with_controller_id(BrokerId(-1)),
        ),
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(wire))
        }
        RequestKind::Metadata(_) => ResponseKind::Metadata(
            MetadataResponse::default()
                .with_error_code(wire)
                .with_controller_id(BrokerId(-1)),
        ),
        _ => return None,
    })
}

/// A FindCoordinator answer where every key carries `code` and no node.
fn find_coordinator_failed(
    request: &FindCoordinatorRequest,
    version: i16,
    code: ErrorCode,
) -> FindCoordinatorResponse {
    let code = code.code();
    if version < BATCHED_FIND_COORDINATOR_VERSION {
        return FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_node_id(BrokerId(-1))
            .with_port(-1);
    }
    let coordinators = request
        .coordinator_keys
        .iter()
        .map(|key| {
            Coordinator::default()
                .with_key(key.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code)
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}
