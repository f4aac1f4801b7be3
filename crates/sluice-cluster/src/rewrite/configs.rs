//! Config answers (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)
//! to requests that named brokers by Sluice node id.
//!
//! The request half is in [`crate::route::admin::configs`]: resources named
//! by a Sluice node went to the real broker standing for it under that
//! broker's id, and some resources were refused and never sent. Here the
//! broker's answer gets the node's id back in place of the real one, and the
//! refused resources their INVALID_REQUEST entries, all in the client's
//! request order (a broker lists unauthorized resources last; Sluice keeps
//! request order instead, which no client can tell from Kafka's).
//!
//! The plan is recomputed from the client's request and the configured Sluice
//! nodes, both unchanged since the request was sent, so nothing about it has
//! to travel with the pending answer. Answers to requests that named no
//! broker are never decoded.

use sluice_codec::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use sluice_codec::kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use sluice_codec::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResourceResponse;
use sluice_codec::kafka_protocol::messages::{
    AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{Request, RequestKind, Response, ResponseKind};

use super::RewriteError;
use crate::error_codes::INVALID_REQUEST;
use crate::route::admin::configs::{self, ConfigResource, Plan, Resource};
use crate::topology::ShotoverNode;

/// Rewrites the answer to a config request that named brokers (see the
/// module docs) and returns true; returns false, leaving the answer
/// undecoded, when `request` named none or is not a config request.
/// `request` is the client's request as it sent it; `nodes` the configured
/// Sluice nodes.
pub fn rewrite_configs_answer(
    response: &mut Response,
    request: &mut Request,
    nodes: &[ShotoverNode],
) -> Result<bool, RewriteError> {
    if !configs::may_name_brokers(request.api_key()) {
        return Ok(false);
    }
    let request = request.body()?;
    let Some(plan) = configs::plan(request, nodes) else {
        return Ok(false);
    };
    Ok(merge_into(request, &plan, response.body_mut()?))
}

/// The whole answer to a request whose resources Sluice refused (nothing was
/// forwarded), from `plan`. `None` for a request that is not a config request.
pub fn refused_answer(request: &RequestKind, plan: &Plan) -> Option<ResponseKind> {
    let mut response = match request {
        RequestKind::DescribeConfigs(_) => {
            ResponseKind::DescribeConfigs(DescribeConfigsResponse::default())
        }
        RequestKind::AlterConfigs(_) => ResponseKind::AlterConfigs(AlterConfigsResponse::default()),
        RequestKind::IncrementalAlterConfigs(_) => {
            ResponseKind::IncrementalAlterConfigs(IncrementalAlterConfigsResponse::default())
        }
        _ => return None,
    };
    merge_into(request, plan, &mut response).then_some(response)
}

/// Puts the broker's `response` and the refused resources of `plan` in
/// request order, with node ids for real ones. False when request and
/// response are not of the same config API.
fn merge_into(request: &RequestKind, plan: &Plan, response: &mut ResponseKind) -> bool {
    match (request, response) {
        (RequestKind::DescribeConfigs(q), ResponseKind::DescribeConfigs(a)) => {
            merge(&q.resources, plan, &mut a.results);
        }
        (RequestKind::AlterConfigs(q), ResponseKind::AlterConfigs(a)) => {
            merge(&q.resources, plan, &mut a.responses);
        }
        (RequestKind::IncrementalAlterConfigs(q), ResponseKind::IncrementalAlterConfigs(a)) => {
            merge(&q.resources, plan, &mut a.responses);
        }
        _ => return false,
    }
    true
}

/// An answer entry for one config resource, as Sluice writes it for a
/// resource it refused.
trait Refusal {
    /// INVALID_REQUEST for the resource of `resource_type` and `name`, with
    /// `message`.
    fn refusal(resource_type: i8, name: StrBytes, message: StrBytes) -> Self;
}

/// Implements [`Refusal`] for config answer entries.
macro_rules! refusal {
    ($($ty:ty),+ $(,)?) => {$(
        impl Refusal for $ty {
            fn refusal(resource_type: i8, name: StrBytes, message: StrBytes) -> Self {
                Self::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(name)
                    .with_error_code(INVALID_REQUEST.code())
                    .with_error_message(Some(message))
            }
        }
    )+};
}

refusal!(
    DescribeConfigsResult,
    AlterConfigsResourceResponse,
    IncrementalResourceResponse,
);

/// Renames the answered broker resources to the plan's node, then lays the
/// answers out in request order: each requested resource takes the first
/// answer with its type and name, or its refusal. Answers matching no
/// requested resource (a broker would not send any) are kept at the end.
fn merge<Q: ConfigResource, A: ConfigResource + Refusal>(
    requested: &[Q],
    plan: &Plan,
    answered: &mut Vec<A>,
) {
    if let Some(node) = plan.node {
        let name = StrBytes::from_string(node.0.to_string());
        for a in answered.iter_mut().filter(|a| a.names_a_broker()) {
            a.set_resource_name(name.clone());
        }
    }
    let mut left: Vec<Option<A>> = answered.drain(..).map(Some).collect();
    let mut merged = Vec::with_capacity(requested.len());
    for (q, what) in requested.iter().zip(&plan.resources) {
        if let Resource::Refuse(message) = what {
            let message = StrBytes::from_string(message.clone());
            merged.push(A::refusal(
                q.resource_type(),
                q.resource_name().clone(),
                message,
            ));
            continue;
        }
        let same = |a: &A| {
            a.resource_type() == q.resource_type() && a.resource_name() == q.resource_name()
        };
        if let Some(a) = left.iter_mut().find(|a| a.as_ref().is_some_and(same)) {
            merged.extend(a.take());
        }
    }
    merged.extend(left.into_iter().flatten());
    *answered = merged;
}
