//! The driver's half of share groups (KIP-932): a ShareFetch or
//! ShareAcknowledge is planned by the core against the client connection's
//! share sessions ([`sluice_cluster::plan::share`]: which broker gets what,
//! at which epoch, after the leaders the view lacks are looked up); each
//! part goes out through the pool's gate like any other (`send.rs`), and
//! here their answers are merged by the core, the view forgets what they
//! say is stale, and their leader hints are rewritten to Sluice nodes.

use sluice_chain::ChainError;
use sluice_codec::{ApiKey, Response};
use tracing::warn;

use super::finish::{count_synthesized, forget, part_failed, rewrite_error};
use super::io::Io;
use crate::pending::Part;
use sluice_cluster::error_codes::NOT_LEADER_OR_FOLLOWER;
use sluice_cluster::plan::share::ShareCombine;
use sluice_cluster::rewrite::Rewriter;
use sluice_cluster::route::share::ShareSessions;
use sluice_cluster::split::PartResult;

/// The client's answer to a share request whose parts are all done.
pub(super) fn finish(
    io: &mut Io,
    sessions: &mut ShareSessions,
    (api, version, correlation_id): (ApiKey, i16, i32),
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
                part_failed(io, part.target, part.broker.as_ref(), api, &error);
                count_synthesized(api);
                failed
            }
            None => failed,
        });
    }
    let (body, stale) = combine.merge(sessions, results);
    forget(&io.shared, &stale);
    let mut response = Response::from_body(api, version, correlation_id, body);
    let nodes = io.shared.nodes.snapshot();
    let view = io.shared.view.read();
    Rewriter::new(&view, &nodes)
        .and_then(|r| r.rewrite_leader_hints(&mut response))
        .map_err(|e| rewrite_error(None, api, e))?;
    Ok(response)
}
