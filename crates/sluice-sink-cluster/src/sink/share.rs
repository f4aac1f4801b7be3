//! The sink's half of share groups (KIP-932): a ShareFetch or
//! ShareAcknowledge is planned against the client connection's share
//! sessions ([`ShareSessions`], the core decides: which broker gets what, at
//! which epoch), each part goes out through the pool's gate like any other,
//! and their answers are merged by the core, the view forgets what they say
//! is stale, and their leader hints are rewritten to Sluice nodes. The
//! parts' leaders are looked up first when the view lacks one.

use sluice_chain::ChainError;
use sluice_codec::{ApiKey, Request, RequestKind, Response, ResponseKind};
use tracing::{debug, warn};

use super::KafkaSinkCluster;
use super::finish::{count_synthesized, rewrite_error};
use super::send::{Dest, fatal_only};
use crate::close::Invariant;
use crate::pending::{Combine, Part, PendingResponse, ShareCombine};
use sluice_cluster::error_codes::NOT_LEADER_OR_FOLLOWER;
use sluice_cluster::rewrite::Rewriter;
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::route::share::ack::AckPlan;
use sluice_cluster::route::share::fetch::FetchPlan;
use sluice_cluster::split::PartResult;

impl KafkaSinkCluster {
    /// Routes a client's ShareFetch or ShareAcknowledge.
    pub(super) async fn send_share(
        &mut self,
        mut request: Request,
    ) -> Result<Option<PendingResponse>, ChainError> {
        let body = request.body()?.clone();
        let unknown = {
            let view = self.shared.view.read();
            self.share.unknown_leaders(&body, &*view)
        };
        if !unknown.is_empty() {
            fatal_only(self.refresh_metadata(Some(&unknown)).await)?;
        }
        let planned = {
            let view = self.shared.view.read();
            match &body {
                RequestKind::ShareFetch(f) => match self.share.plan_fetch(f, &*view) {
                    FetchPlan::Refused(r) => Err(ResponseKind::ShareFetch(r)),
                    FetchPlan::Parts(parts, merge) => Ok((
                        parts
                            .into_iter()
                            .map(|(b, r)| (b, RequestKind::ShareFetch(r)))
                            .collect::<Vec<_>>(),
                        ShareCombine::Fetch(merge),
                    )),
                },
                RequestKind::ShareAcknowledge(a) => match self.share.plan_acknowledge(a, &*view) {
                    AckPlan::Refused(r) => Err(ResponseKind::ShareAcknowledge(r)),
                    AckPlan::Parts(parts, merge) => Ok((
                        parts
                            .into_iter()
                            .map(|(b, r)| (b, RequestKind::ShareAcknowledge(r)))
                            .collect(),
                        ShareCombine::Acknowledge(merge),
                    )),
                },
                _ => return Err(Invariant::ShareWithoutBody(request.api_key()).into()),
            }
        };
        let (parts, combine) = match planned {
            Ok(planned) => planned,
            Err(answer) => {
                debug!(api = ?request.api_key(), "answering a share request with a session error");
                return Ok(Some(PendingResponse::answering(&request, answer)));
            }
        };
        let (api, version) = (request.api_key(), request.api_version());
        let correlation_id = request.correlation_id();
        let client_id = request.header().client_id.clone();
        let mut sent = Vec::with_capacity(parts.len());
        for (broker, body) in parts {
            let part = Request::from_body(api, version, correlation_id, client_id.clone(), body);
            let Some(part) = self.send_part(Dest::Broker(broker), part).await? else {
                return Err(Invariant::SharePartWithoutAnswer(api).into());
            };
            sent.push(part);
        }
        Ok(Some(PendingResponse {
            correlation_id,
            api_key: api,
            api_version: version,
            parts: sent,
            combine: Combine::Share(Box::new(combine)),
        }))
    }

    /// The client's answer to a share request whose parts are all done.
    pub(super) fn finish_share(
        &mut self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        combine: ShareCombine,
        parts: Vec<Part>,
    ) -> Result<Response, ChainError> {
        let mut results = Vec::with_capacity(parts.len());
        for mut part in parts {
            let failed = PartResult::Failed {
                error_code: NOT_LEADER_OR_FOLLOWER,
            };
            results.push(match part.take_result() {
                Some(Ok(response)) => match response.into_body() {
                    Ok(body) => PartResult::Response(body),
                    Err(e) => {
                        warn!(broker = %part.broker_label(), "undecodable {api:?} answer, answering its partitions with NOT_LEADER_OR_FOLLOWER: {e}");
                        count_synthesized(api);
                        failed
                    }
                },
                Some(Err(error)) => {
                    self.part_failed(part.target, part.broker.as_ref(), api, &error);
                    count_synthesized(api);
                    failed
                }
                None => failed,
            });
        }
        let (body, stale) = merge(&mut self.share, combine, results);
        self.forget(&stale);
        let mut response = Response::from_body(api, version, correlation_id, body);
        let nodes = self.shared.nodes.snapshot();
        let view = self.shared.view.read();
        Rewriter::new(&view, &nodes)
            .and_then(|r| r.rewrite_leader_hints(&mut response))
            .map_err(|e| rewrite_error(None, api, e))?;
        Ok(response)
    }
}

/// The core's merge for `combine`, the parts' answers taken as its type.
fn merge(
    sessions: &mut ShareSessions,
    combine: ShareCombine,
    results: Vec<PartResult<ResponseKind>>,
) -> (ResponseKind, Vec<sluice_cluster::route::Stale>) {
    match combine {
        ShareCombine::Fetch(merge) => {
            let results = results
                .into_iter()
                .map(|r| match r {
                    PartResult::Response(ResponseKind::ShareFetch(f)) => PartResult::Response(f),
                    _ => PartResult::Failed {
                        error_code: NOT_LEADER_OR_FOLLOWER,
                    },
                })
                .collect();
            let (merged, stale) = sessions.merge_fetch(merge, results);
            (ResponseKind::ShareFetch(merged), stale)
        }
        ShareCombine::Acknowledge(merge) => {
            let results = results
                .into_iter()
                .map(|r| match r {
                    PartResult::Response(ResponseKind::ShareAcknowledge(a)) => {
                        PartResult::Response(a)
                    }
                    _ => PartResult::Failed {
                        error_code: NOT_LEADER_OR_FOLLOWER,
                    },
                })
                .collect();
            let (merged, stale) = sessions.merge_acknowledge(merge, results);
            (ResponseKind::ShareAcknowledge(merged), stale)
        }
    }
}
