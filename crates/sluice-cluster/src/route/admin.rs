//! Admin APIs and the APIs clients may not send.
//!
//! Every client-facing API without a family of its own goes to any broker: a
//! KRaft broker forwards controller work (CreateTopics, configs, ACLs, quotas,
//! SCRAM credentials, reassignments) to the active controller itself.
//!
//! - **Writes vs reads** ([`kind`]): a write whose broker fails may or may not
//!   have happened, so it is not retried; the client gets REQUEST_TIMED_OUT
//!   and decides. A read is retried once on another broker.
//! - **Stale topics**: after CreateTopics, DeleteTopics, CreatePartitions,
//!   ElectLeaders and AlterPartitionReassignments the topics they name are
//!   forgotten from the view ([`stale_topics`]), so that the next request
//!   about them refreshes the metadata. (ElectLeaders for every partition
//!   names no topic; the leaders it moves are found through
//!   NOT_LEADER_OR_FOLLOWER answers instead.)
//! - **Broker config resources** ([`configs`]): DescribeConfigs of a BROKER
//!   or BROKER_LOGGER resource named by a Sluice node id goes to a real
//!   broker standing for that node, renamed to its real id and back; the
//!   alter APIs refuse such resources (a Sluice node stands for the whole
//!   cluster) with INVALID_REQUEST and forward the rest of the request.
//! - **DescribeTopicPartitions** is a read to any broker whose answer is
//!   rewritten like Metadata's (`rewrite/topic_partitions.rs`).
//! - **Known limits**: APIs that take real broker ids (CreateTopics and
//!   CreatePartitions manual assignments, AlterPartitionReassignments,
//!   AlterReplicaLogDirs) are forwarded as sent, and ListPartitionReassignments
//!   answers with real ids; a client that only knows Sluice node ids can only use them with
//!   ids it learned elsewhere. Seen with Kafka's tools
//!   (`crates/sluice/tests/it/cluster_admin.rs`): `kafka-reassign-partitions
//!   --execute` refuses real ids before sending anything ("Unknown broker
//!   id", checked against DescribeCluster); `--list` and `--cancel` work;
//!   `--verify` compares the target's real ids with the Sluice ids Metadata
//!   (and DescribeTopicPartitions) shows and never reports the move
//!   complete, then times out clearing throttles on brokers it cannot reach.
//!   Describing a Sluice node's broker configs shows one real broker's
//!   values, `node.id` and listeners included.
//! - **Not for clients** ([`not_for_clients`]): inter-broker and controller
//!   APIs, and the ones that expose the real topology
//!   ([`crate::rewrite::is_client_facing`]), are answered by Sluice with
//!   UNSUPPORTED_VERSION where the response has an error code, so the client
//!   gets an answer instead of a closed connection.

use sluice_codec::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use sluice_codec::kafka_protocol::messages::create_acls_response::AclCreationResult;
use sluice_codec::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use sluice_codec::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use sluice_codec::kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use sluice_codec::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use sluice_codec::kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use sluice_codec::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResourceResponse;
use sluice_codec::kafka_protocol::messages::*;

use sluice_codec::kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;

use crate::api::failure::FailureAnswer;
use crate::error_codes::ErrorCode;
use crate::topology::{TopicId, TopicRef};

pub mod configs;

/// The topics an admin write names, to forget once it succeeded.
pub fn stale_topics(request: &RequestKind) -> Vec<TopicRef> {
    let name = |n: &TopicName| TopicRef::Name(n.clone());
    match request {
        RequestKind::CreateTopics(r) => r.topics.iter().map(|t| name(&t.name)).collect(),
        RequestKind::DeleteTopics(r) => {
            let mut topics: Vec<TopicRef> = r.topic_names.iter().map(name).collect();
            topics.extend(r.topics.iter().map(|t| match &t.name {
                Some(n) => name(n),
                None => TopicRef::Id(TopicId(t.topic_id.as_u128())),
            }));
            topics
        }
        RequestKind::CreatePartitions(r) => r.topics.iter().map(|t| name(&t.name)).collect(),
        RequestKind::ElectLeaders(r) => r
            .topic_partitions
            .iter()
            .flatten()
            .map(|t| name(&t.topic))
            .collect(),
        RequestKind::AlterPartitionReassignments(r) => {
            r.topics.iter().map(|t| name(&t.name)).collect()
        }
        _ => Vec::new(),
    }
}

/// Whether answers of `api` carry a top-level error code that
/// [`top_level_error`] reads (decoding them is cheap: admin answers are small).
pub fn has_top_level_error(api: ApiKey) -> bool {
    use ApiKey as K;
    matches!(
        api,
        K::ElectLeaders
            | K::AlterPartitionReassignments
            | K::ListPartitionReassignments
            | K::DescribeAcls
            | K::DescribeClientQuotas
            | K::DescribeUserScramCredentials
            | K::UpdateFeatures
    )
}

/// The top-level error code of an admin answer, when it has one (for the
/// NOT_CONTROLLER staleness check).
pub fn top_level_error(response: &ResponseKind) -> Option<i16> {
    Some(match response {
        ResponseKind::ElectLeaders(r) => r.error_code,
        ResponseKind::AlterPartitionReassignments(r) => r.error_code,
        ResponseKind::ListPartitionReassignments(r) => r.error_code,
        ResponseKind::DescribeAcls(r) => r.error_code,
        ResponseKind::DescribeClientQuotas(r) => r.error_code,
        ResponseKind::DescribeUserScramCredentials(r) => r.error_code,
        ResponseKind::UpdateFeatures(r) => r.error_code,
        _ => return None,
    })
}

/// The failure answers of the admin APIs (and of those not for clients): a
/// response where each item (topic, resource, ACL) or the top level carries
/// the code; `None` when the response has no place for an error (the caller
/// then closes the client connection).
#[derive(Debug, Clone, Copy)]
pub struct AdminAnswers;

impl FailureAnswer for AdminAnswers {
    fn failure_answer(
        &self,
        api: ApiKey,
        request: &RequestKind,
        _version: i16,
        code: ErrorCode,
    ) -> Option<ResponseKind> {
        per_item_error(request, code).or_else(|| top_level_error_response(api, code))
    }
}

fn per_item_error(request: &RequestKind, code: ErrorCode) -> Option<ResponseKind> {
    let code = code.code();
    Some(match request {
        RequestKind::CreateTopics(r) => {
            let topics = r.topics.iter().map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            });
            ResponseKind::CreateTopics(
                CreateTopicsResponse::default().with_topics(topics.collect()),
            )
        }
        RequestKind::DeleteTopics(r) => {
            let mut results: Vec<DeletableTopicResult> = r
                .topic_names
                .iter()
                .map(|n| {
                    DeletableTopicResult::default()
                        .with_name(Some(n.clone()))
                        .with_error_code(code)
                })
                .collect();
            results.extend(r.topics.iter().map(|t| {
                DeletableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_error_code(code)
            }));
            ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(results))
        }
        RequestKind::CreatePartitions(r) => {
            let results = r.topics.iter().map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
            });
            ResponseKind::CreatePartitions(
                CreatePartitionsResponse::default().with_results(results.collect()),
            )
        }
        RequestKind::DescribeConfigs(r) => {
            let results = r.resources.iter().map(|res| {
                DescribeConfigsResult::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone())
                    .with_error_code(code)
            });
            ResponseKind::DescribeConfigs(
                DescribeConfigsResponse::default().with_results(results.collect()),
            )
        }
        RequestKind::AlterConfigs(r) => {
            let results = r.resources.iter().map(|res| {
                AlterConfigsResourceResponse::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone())
                    .with_error_code(code)
            });
            ResponseKind::AlterConfigs(
                AlterConfigsResponse::default().with_responses(results.collect()),
            )
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            let results = r.resources.iter().map(|res| {
                IncrementalResourceResponse::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone())
                    .with_error_code(code)
            });
            ResponseKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsResponse::default().with_responses(results.collect()),
            )
        }
        RequestKind::DescribeTopicPartitions(r) => {
            let topics = r.topics.iter().map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(t.name.clone()))
                    .with_error_code(code)
            });
            ResponseKind::DescribeTopicPartitions(
                DescribeTopicPartitionsResponse::default().with_topics(topics.collect()),
            )
        }
        RequestKind::CreateAcls(r) => {
            let results = r
                .creations
                .iter()
                .map(|_| AclCreationResult::default().with_error_code(code));
            ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results.collect()))
        }
        RequestKind::DeleteAcls(r) => {
            let results = r
                .filters
                .iter()
                .map(|_| DeleteAclsFilterResult::default().with_error_code(code));
            ResponseKind::DeleteAcls(
                DeleteAclsResponse::default().with_filter_results(results.collect()),
            )
        }
        _ => return None,
    })
}

/// Builds `$resp::default().with_error_code(code)` for each listed api.
macro_rules! top_level_errors {
    ($api:expr, $code:expr, $($name:ident: $resp:ident,)*) => {
        match $api {
            $(ApiKey::$name => Some(ResponseKind::$name($resp::default().with_error_code($code))),)*
            _ => None,
        }
    };
}

/// A response to `api` whose top-level error code is `code`, for the APIs
/// that have one (ElectLeaders from v1: the table's `failure_answer_since`).
fn top_level_error_response(api: ApiKey, code: ErrorCode) -> Option<ResponseKind> {
    let code = code.code();
    top_level_errors!(api, code,
        ElectLeaders: ElectLeadersResponse,
        AlterPartitionReassignments: AlterPartitionReassignmentsResponse,
        ListPartitionReassignments: ListPartitionReassignmentsResponse,
        DescribeAcls: DescribeAclsResponse,
        DescribeClientQuotas: DescribeClientQuotasResponse,
        DescribeUserScramCredentials: DescribeUserScramCredentialsResponse,
        CreateDelegationToken: CreateDelegationTokenResponse,
        RenewDelegationToken: RenewDelegationTokenResponse,
        ExpireDelegationToken: ExpireDelegationTokenResponse,
        DescribeDelegationToken: DescribeDelegationTokenResponse,
        UpdateFeatures: UpdateFeaturesResponse,
        GetTelemetrySubscriptions: GetTelemetrySubscriptionsResponse,
        PushTelemetry: PushTelemetryResponse,
        ListConfigResources: ListConfigResourcesResponse,
        Vote: VoteResponse,
        BeginQuorumEpoch: BeginQuorumEpochResponse,
        EndQuorumEpoch: EndQuorumEpochResponse,
        AlterPartition: AlterPartitionResponse,
        Envelope: EnvelopeResponse,
        FetchSnapshot: FetchSnapshotResponse,
        BrokerRegistration: BrokerRegistrationResponse,
        BrokerHeartbeat: BrokerHeartbeatResponse,
        AllocateProducerIds: AllocateProducerIdsResponse,
        ControllerRegistration: ControllerRegistrationResponse,
        AssignReplicasToDirs: AssignReplicasToDirsResponse,
        UpdateRaftVoter: UpdateRaftVoterResponse,
        DescribeQuorum: DescribeQuorumResponse,
        AddRaftVoter: AddRaftVoterResponse,
        RemoveRaftVoter: RemoveRaftVoterResponse,
        UnregisterBroker: UnregisterBrokerResponse,
    )
}

/// The answer to an API clients may not send through Sluice: UNSUPPORTED_VERSION
/// at the top level where the response has one, else the empty response (for
/// WriteTxnMarkers and the share-group state APIs, whose errors live in items
/// the request named and which no client sends).
/// `None` for an API this list does not know (the client is then closed).
pub fn not_for_clients(api: ApiKey, version: i16) -> Option<ResponseKind> {
    let code = super::UNSUPPORTED_VERSION;
    if crate::api::describe(api).has_failure_answer(version)
        && let Some(response) = top_level_error_response(api, code)
    {
        return Some(response);
    }
    Some(match api {
        ApiKey::WriteTxnMarkers => ResponseKind::WriteTxnMarkers(Default::default()),
        ApiKey::InitializeShareGroupState => {
            ResponseKind::InitializeShareGroupState(Default::default())
        }
        ApiKey::ReadShareGroupState => ResponseKind::ReadShareGroupState(Default::default()),
        ApiKey::WriteShareGroupState => ResponseKind::WriteShareGroupState(Default::default()),
        ApiKey::DeleteShareGroupState => ResponseKind::DeleteShareGroupState(Default::default()),
        ApiKey::ReadShareGroupStateSummary => {
            ResponseKind::ReadShareGroupStateSummary(Default::default())
        }
        _ => return None,
    })
}
