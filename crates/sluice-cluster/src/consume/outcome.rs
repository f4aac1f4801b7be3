//! What a finished fetch part yields ([`Outcome`]), and what becomes of a
//! parked part's outcome between fetches ([`FetchState::settle`]): a part
//! that failed, or whose answer is unreadable, gives its partitions the
//! retriable NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and
//! fetches again); the failure of a part sent ahead is dropped, since no
//! fetch asked for it.

use std::time::Instant;

use sluice_codec::ResponseKind;
use sluice_codec::kafka_protocol::messages::FetchResponse;

use super::{FetchState, PartMeta};
use crate::error_codes::{ErrorCode, NOT_LEADER_OR_FOLLOWER};

/// What a finished part yielded, for [`FetchState::assemble`].
#[derive(Debug)]
pub enum Outcome {
    /// The broker's answer, decoded, and the size of the frame it came in
    /// (0 when not read from a broker).
    Answer(FetchResponse, usize),
    /// No answer: its partitions get this error.
    Failed(ErrorCode),
    /// Still out: parked.
    Parked,
}

impl Outcome {
    /// A part that failed or whose answer could not be read.
    pub fn failed() -> Self {
        Outcome::Failed(NOT_LEADER_OR_FOLLOWER)
    }

    /// A part answered with `body`, read from a frame of `frame_bytes`; an
    /// answer of another API counts as unreadable.
    pub fn answered(body: ResponseKind, frame_bytes: usize) -> Self {
        match body {
            ResponseKind::Fetch(answer) => Outcome::Answer(answer, frame_bytes),
            _ => Outcome::failed(),
        }
    }
}

impl<P> FetchState<P> {
    /// Keeps what a parked part yielded between fetches (at `now`) for the
    /// client's next fetch: its answer stashed, or its failure (unless it
    /// was sent ahead, which no fetch asked for).
    pub fn settle(&mut self, meta: &PartMeta, outcome: Outcome, now: Instant) {
        match outcome {
            Outcome::Answer(answer, frame_bytes) => self.absorb(meta, answer, frame_bytes, now),
            Outcome::Failed(_) if meta.ahead => {}
            Outcome::Failed(code) => self.absorb_failure(meta, code, now),
            Outcome::Parked => {}
        }
    }
}
