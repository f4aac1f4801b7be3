//! Config resources that name a broker: BROKER (type 4) and BROKER_LOGGER
//! (type 8) in DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
//!
//! A client only knows Sluice node ids, so that is what it names; a real
//! broker serves such a resource only when it is named by its own id, and
//! refuses any other id ("Unexpected broker id"). The cluster default (empty
//! name) is served by any broker and is not touched here.
//!
//! - **Describe**: a resource named by a Sluice node is described by one real
//!   broker standing for that node ([`real_broker`]: deterministic, in the
//!   node's rack when the cluster has brokers there), renamed to that
//!   broker's id in the request and back to the node's id in the answer
//!   (`rewrite/configs.rs`). The configs shown are that broker's own, values
//!   included (`node.id`, `broker.rack`, listeners): an operator asking for a
//!   broker's configs gets a real broker's.
//! - **One node per request**: a request naming several Sluice nodes is not
//!   split: the resources of the first node named are described, those of
//!   any other node get INVALID_REQUEST saying to ask for that node in its
//!   own request. Java's Admin already sends one request per broker node.
//! - **Unknown ids** (not a configured Sluice node, or not a number) get
//!   INVALID_REQUEST with a message naming the Sluice node ids; the rest of
//!   the request is still served.
//! - **Alter**: a Sluice node stands for the whole cluster, so applying a
//!   per-broker config to one arbitrary real broker would surprise an
//!   operator: every named BROKER/BROKER_LOGGER resource is refused with
//!   INVALID_REQUEST and a message pointing at the cluster default
//!   (`--entity-default`) or a direct connection. The other resources are
//!   forwarded and the answers are merged in request order.
//!
//! A request whose resources are all refused never leaves Sluice. One whose
//! broker failed is answered REQUEST_TIMED_OUT for every resource (it is not
//! retried on another broker: another broker would refuse the renamed
//! resource, and an alter may have happened).

use sluice_codec::kafka_protocol::messages::{ApiKey, BrokerId, RequestKind};
use sluice_codec::kafka_protocol::messages::{
    alter_configs_request, alter_configs_response, describe_configs_request,
    describe_configs_response, incremental_alter_configs_request,
    incremental_alter_configs_response,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;

use crate::topology::{ClusterView, ShotoverNode};

/// The BROKER config resource type.
pub const BROKER: i8 = 4;
/// The BROKER_LOGGER config resource type.
pub const BROKER_LOGGER: i8 = 8;

/// What Sluice does with one resource of a config request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// Forwarded as the client sent it (topics, groups, cluster defaults...).
    Forward,
    /// Named by this Sluice node: sent to the real broker standing for it,
    /// under that broker's id.
    Node(BrokerId),
    /// Answered by Sluice with INVALID_REQUEST and this message.
    Refuse(String),
}

/// What to do with each resource of a config request that names brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One entry per resource of the request, in request order.
    pub resources: Vec<Resource>,
    /// The Sluice node the [`Resource::Node`] entries name (at most one).
    pub node: Option<BrokerId>,
}

impl Plan {
    /// Whether any resource goes to a broker.
    pub fn forwards_any(&self) -> bool {
        self.resources
            .iter()
            .any(|r| !matches!(r, Resource::Refuse(_)))
    }
}

/// A config resource or result: the fields this module reads and renames,
/// the same in each of the six kafka-protocol structs.
pub trait ConfigResource {
    /// The resource type (4: BROKER, 8: BROKER_LOGGER, 2: TOPIC, ...).
    fn resource_type(&self) -> i8;
    /// The resource name (a broker id for broker resources, empty for the
    /// cluster default).
    fn resource_name(&self) -> &StrBytes;
    /// Renames the resource.
    fn set_resource_name(&mut self, name: StrBytes);

    /// Whether it is a BROKER or BROKER_LOGGER resource with a name.
    fn names_a_broker(&self) -> bool {
        matches!(self.resource_type(), BROKER | BROKER_LOGGER) && !self.resource_name().is_empty()
    }
}

macro_rules! config_resource {
    ($($ty:path),* $(,)?) => {$(
        impl ConfigResource for $ty {
            fn resource_type(&self) -> i8 {
                self.resource_type
            }
            fn resource_name(&self) -> &StrBytes {
                &self.resource_name
            }
            fn set_resource_name(&mut self, name: StrBytes) {
                self.resource_name = name;
            }
        }
    )*};
}

config_resource!(
    describe_configs_request::DescribeConfigsResource,
    alter_configs_request::AlterConfigsResource,
    incremental_alter_configs_request::AlterConfigsResource,
    describe_configs_response::DescribeConfigsResult,
    alter_configs_response::AlterConfigsResourceResponse,
    incremental_alter_configs_response::AlterConfigsResourceResponse,
);

/// Whether requests of `api` may name brokers in their resources.
pub fn may_name_brokers(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::DescribeConfigs | ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs
    )
}

/// What to do with each resource of `request`, given the configured Sluice
/// `nodes`; `None` when nothing in it names a broker (or it is not a config
/// request): it is then forwarded untouched.
pub fn plan(request: &RequestKind, nodes: &[ShotoverNode]) -> Option<Plan> {
    let plan = match request {
        RequestKind::DescribeConfigs(r) => plan_describe(&r.resources, nodes),
        RequestKind::AlterConfigs(r) => plan_alter(&r.resources, nodes),
        RequestKind::IncrementalAlterConfigs(r) => plan_alter(&r.resources, nodes),
        _ => return None,
    };
    let touched = plan.resources.iter().any(|r| *r != Resource::Forward);
    touched.then_some(plan)
}

fn plan_describe<R: ConfigResource>(resources: &[R], nodes: &[ShotoverNode]) -> Plan {
    let mut node = None;
    let resources = resources
        .iter()
        .map(|r| {
            if !r.names_a_broker() {
                return Resource::Forward;
            }
            let name = r.resource_name();
            let Some(id) = sluice_node(name, nodes) else {
                return Resource::Refuse(unknown_broker(name, nodes));
            };
            match node {
                None => {
                    node = Some(id);
                    Resource::Node(id)
                }
                Some(first) if first == id => Resource::Node(id),
                Some(first) => Resource::Refuse(format!(
                    "Sluice describes one broker per request, and this request already names \
                     broker {}: describe broker {} in a request of its own",
                    first.0, id.0
                )),
            }
        })
        .collect();
    Plan { resources, node }
}

fn plan_alter<R: ConfigResource>(resources: &[R], nodes: &[ShotoverNode]) -> Plan {
    let resources = resources
        .iter()
        .map(|r| {
            if !r.names_a_broker() {
                return Resource::Forward;
            }
            let name = r.resource_name();
            let what = match sluice_node(name, nodes) {
                Some(_) => {
                    format!("broker {name} is a Sluice node, which stands for the whole cluster")
                }
                None => format!("broker {name} is not a Sluice node"),
            };
            Resource::Refuse(format!(
                "Per-broker configs cannot be altered through Sluice ({what}): alter the \
                 cluster default (--entity-default) instead, or connect to the broker directly"
            ))
        })
        .collect();
    Plan {
        resources,
        node: None,
    }
}

/// The Sluice node `name` names, if it names one.
fn sluice_node(name: &str, nodes: &[ShotoverNode]) -> Option<BrokerId> {
    let id = BrokerId(name.parse().ok()?);
    nodes.iter().any(|n| n.broker_id == id).then_some(id)
}

fn unknown_broker(name: &str, nodes: &[ShotoverNode]) -> String {
    let ids: Vec<String> = nodes.iter().map(|n| n.broker_id.0.to_string()).collect();
    format!(
        "Unknown broker id {name}: the brokers of this cluster, as Sluice shows it, are {}",
        ids.join(", ")
    )
}

/// The request to send for `plan`: the resources not refused, those of the
/// Sluice node renamed to `real` (the broker standing for it). `None` when
/// every resource is refused, or when the plan names a node and `real` is
/// `None`.
pub fn forwarded(
    request: &RequestKind,
    plan: &Plan,
    real: Option<BrokerId>,
) -> Option<RequestKind> {
    if !plan.forwards_any() || (plan.node.is_some() && real.is_none()) {
        return None;
    }
    let real = real.map(|id| StrBytes::from_string(id.0.to_string()));
    let real = real.as_ref();
    let mut request = request.clone();
    match &mut request {
        RequestKind::DescribeConfigs(r) => keep_forwarded(&mut r.resources, plan, real),
        RequestKind::AlterConfigs(r) => keep_forwarded(&mut r.resources, plan, real),
        RequestKind::IncrementalAlterConfigs(r) => keep_forwarded(&mut r.resources, plan, real),
        _ => return None,
    }
    Some(request)
}

fn keep_forwarded<R: ConfigResource>(resources: &mut Vec<R>, plan: &Plan, real: Option<&StrBytes>) {
    let mut plan = plan.resources.iter();
    resources.retain_mut(|r| match plan.next() {
        Some(Resource::Forward) | None => true,
        Some(Resource::Node(_)) => match real {
            Some(name) => {
                r.set_resource_name(name.clone());
                true
            }
            None => false,
        },
        Some(Resource::Refuse(_)) => false,
    });
}

/// The real broker standing for Sluice node `node` in config requests, from
/// the brokers in `view`: the node's position among the configured nodes of
/// its rack (by id) picks one of the brokers in that rack (by id), or of all
/// brokers when the rack has none. Deterministic, so that describing a node
/// twice shows the same broker, and spread, so that nodes of one rack show
/// different brokers while there are enough. `None` when `node` is not
/// configured or no broker is known.
pub fn real_broker(view: &ClusterView, nodes: &[ShotoverNode], node: BrokerId) -> Option<BrokerId> {
    let rack = &nodes.iter().find(|n| n.broker_id == node)?.rack;
    let mut peers: Vec<BrokerId> = nodes
        .iter()
        .filter(|n| &n.rack == rack)
        .map(|n| n.broker_id)
        .collect();
    peers.sort();
    peers.dedup();
    let position = peers.iter().position(|id| *id == node)?;
    let in_rack: Vec<BrokerId> = view
        .brokers()
        .filter(|b| b.rack.as_deref() == Some(&**rack))
        .map(|b| b.id)
        .collect();
    let candidates = if in_rack.is_empty() {
        view.brokers().map(|b| b.id).collect()
    } else {
        in_rack
    };
    candidates.get(position % candidates.len().max(1)).copied()
}
