//! Admin and inter-broker APIs: the answer to APIs clients may not send, and
//! the topics an admin write makes stale.

use sluice_codec::kafka_protocol::messages::create_topics_request::CreatableTopic;
use sluice_codec::kafka_protocol::messages::delete_topics_request::DeleteTopicState;

use super::*;
use crate::route::admin;
use crate::topology::TopicId;

#[test]
fn apis_clients_may_not_send_get_an_answer() {
    use ApiKey as K;
    for api in [
        K::WriteTxnMarkers,
        K::Vote,
        K::BeginQuorumEpoch,
        K::EndQuorumEpoch,
        K::AlterPartition,
        K::Envelope,
        K::FetchSnapshot,
        K::BrokerRegistration,
        K::BrokerHeartbeat,
        K::AllocateProducerIds,
        K::ControllerRegistration,
        K::AssignReplicasToDirs,
        K::UpdateRaftVoter,
        K::InitializeShareGroupState,
        K::ReadShareGroupState,
        K::WriteShareGroupState,
        K::DeleteShareGroupState,
        K::ReadShareGroupStateSummary,
        K::DescribeQuorum,
        K::AddRaftVoter,
        K::RemoveRaftVoter,
        K::UnregisterBroker,
    ] {
        assert_eq!(family(api), Family::NotForClients, "{api:?}");
        let range = api.valid_versions();
        for version in range.min..=range.max {
            let body = admin::not_for_clients(api, version)
                .unwrap_or_else(|| panic!("{api:?}: no answer"));
            round_trip(api, version, body);
        }
    }
    let vote = admin::not_for_clients(K::Vote, 0).unwrap();
    let ResponseKind::Vote(v) = vote else {
        panic!("not a Vote answer")
    };
    assert_eq!(v.error_code, UNSUPPORTED_VERSION);
}

#[test]
fn admin_writes_name_their_stale_topics() {
    let create = RequestKind::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default().with_name(name("new"))]),
    );
    assert_eq!(admin::stale_topics(&create), [TopicRef::Name(name("new"))]);
    let id = uuid::Uuid::from_u128(77);
    let delete = RequestKind::DeleteTopics(
        DeleteTopicsRequest::default()
            .with_topic_names(vec![name("old")])
            .with_topics(vec![DeleteTopicState::default().with_topic_id(id)]),
    );
    assert_eq!(
        admin::stale_topics(&delete),
        [TopicRef::Name(name("old")), TopicRef::Id(TopicId(77))]
    );
    let elect_all =
        RequestKind::ElectLeaders(ElectLeadersRequest::default().with_topic_partitions(None));
    assert!(admin::stale_topics(&elect_all).is_empty());
    let describe = RequestKind::DescribeConfigs(DescribeConfigsRequest::default());
    assert!(admin::stale_topics(&describe).is_empty());
}
