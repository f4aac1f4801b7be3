//! Byte budgets: how much memory one client connection, and all of them
//! together, may hold.
//!
//! A client that pipelines requests and never reads would otherwise make
//! Sluice hold every response it asked for: 40 Fetches of 50 MiB are 2 GB.
//! Kafka bounds this by answering one request per connection at a time;
//! Sluice pipelines, so it counts bytes instead.
//!
//! What a connection holds, counted from the moment Sluice commits to it:
//! - a request, from its length prefix (the whole frame is reserved as soon
//!   as its size is known, as Kafka's memory pool allocates on the size)
//!   until its response has been written;
//! - for each request the chain still owes, the response it will bring: a
//!   Fetch's `max_bytes`, anything else [`RESPONSE_ESTIMATE_BYTES`], replaced
//!   by the response's real size once it is in hand;
//! - encoded responses not yet written to the client;
//! - what the chain keeps for the client beyond the responses it owes
//!   ([`sluice_chain::transform::Sink::kept_bytes`]: the consume path's
//!   parked fetch parts, stashed answers and the client's fetch session), as it reports after each
//!   request and response. The chain is told the room left then
//!   ([`sluice_chain::transform::Sink::set_room_bytes`]): what it takes on
//!   ahead of the client's requests (fetches read ahead) must fit in it.
//!
//! At a limit the connection stops reading, as a broker mutes a channel, and
//! TCP pushes back on the client; requests already read wait in its buffer.
//! It goes on once its own responses have been written (its budget) or once
//! any connection released memory (the process's). Admission is not strict,
//! like Kafka's `SimpleMemoryPool`: a request is admitted while the holder
//! is below its limit, so a budget smaller than one frame slows a client
//! down but never wedges it. A connection that has committed to nothing
//! (only its read buffer holds bytes) may always forward one request it has
//! read: a full process then serves each connection one request at a time,
//! as Kafka does, and read frames never wait on each other. Usage can
//! therefore exceed a limit by what one admission brings, never more. What
//! the chain keeps is released by the client's next fetch, so a connection
//! that owes nothing but keeps something may always read its next request.
//!
//! A frame is admitted when its length prefix has arrived, like Kafka's
//! memory pool allocating on the size: its declared size is added to the
//! process's count by one compare-and-swap that succeeds only while the
//! process is below its budget. Connections whose reads were already under
//! way when the budget filled (idle ones wait in a read) may all receive a
//! prefix at once; each takes its own turn at the swap, so only those that
//! find room are admitted, and the process exceeds its budget by at most
//! one frame. A frame not admitted is read no further (beyond the one read
//! that brought its prefix) until some connection releases memory.
//!
//! A Fetch is clamped to fit: its `max_bytes` is lowered to the room left
//! under both limits (never below [`MIN_FETCH_MAX_BYTES`]), in the frame
//! itself ([`sluice_codec::Request::parse_with_fetch_limit`]). Kafka still
//! returns at least one record batch, so a clamped consumer slows down but
//! always makes progress.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use metrics::{Gauge, gauge};
use sluice_metrics::names;
use tokio::sync::Notify;

/// What a request other than Fetch is expected to bring back, until its
/// response is in hand: produce, offset and group answers are far smaller,
/// and the few large ones (Metadata of a big cluster) are counted at their
/// real size once they arrive.
pub(crate) const RESPONSE_ESTIMATE_BYTES: usize = 16 * 1024;

/// The smallest `max_bytes` a clamped Fetch carries.
pub(crate) const MIN_FETCH_MAX_BYTES: usize = 64 * 1024;

/// The memory budget shared by every client connection of the process.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
    /// Woken when usage falls below the limit, for connections that stopped
    /// reading because the process was at it.
    freed: Notify,
    /// `sluice_memory_budget_used_bytes{scope="process"}`.
    used_gauge: Gauge,
}

impl MemoryBudget {
    /// A budget of `limit_bytes`, shown in `/metrics`.
    pub fn new(limit_bytes: usize) -> Arc<Self> {
        gauge!(names::MEMORY_BUDGET_BYTES, "scope" => "process").set(limit_bytes as f64);
        Arc::new(Self {
            limit: limit_bytes,
            used: AtomicUsize::new(0),
            freed: Notify::new(),
            used_gauge: gauge!(names::MEMORY_BUDGET_USED_BYTES, "scope" => "process"),
        })
    }

    /// Bytes held now, by every connection together.
    pub(crate) fn used_bytes(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.used_bytes())
    }

    /// Adds `n` if the process is below its budget now, atomically (a
    /// frame's admission); `n == 0` always fits.
    fn try_add(&self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let limit = self.limit;
        match self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used < limit).then_some(used + n)
            }) {
            Ok(before) => {
                self.used_gauge.set((before + n) as f64);
                true
            }
            Err(_) => false,
        }
    }

    fn add(&self, n: usize) {
        let now = self.used.fetch_add(n, Ordering::Relaxed) + n;
        self.used_gauge.set(now as f64);
    }

    fn release(&self, n: usize) {
        let before = self.used.fetch_sub(n, Ordering::Relaxed);
        let now = before - n;
        self.used_gauge.set(now as f64);
        if before >= self.limit && now < self.limit {
            self.freed.notify_waiters();
        }
    }
}

/// Why a connection may not read its next request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// It holds its whole budget; its own responses must drain first.
    Connection,
    /// The process is at its budget; any connection's release may free it.
    Process,
}

impl Full {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Connection => "connection",
            Self::Process => "process",
        }
    }
}

/// One connection's share: what it holds, and why.
#[derive(Debug)]
pub(crate) struct ConnectionBudget {
    limit: usize,
    process: Arc<MemoryBudget>,
    /// Everything below, also counted in `process`.
    held: usize,
    /// Reserved for the frame being read, from its length prefix on.
    reading: usize,
    /// The frame being read was admitted: its declared size is reserved.
    admitted: bool,
    /// Reserved for each request the chain still owes a response for, in
    /// request order (the chain answers in that order): its frame plus the
    /// response it will bring.
    owed: VecDeque<usize>,
    /// What the chain keeps for the client beyond what it owes, as last
    /// reported ([`ConnectionBudget::set_kept`]).
    kept: usize,
}

impl ConnectionBudget {
    pub(crate) fn new(limit: usize, process: Arc<MemoryBudget>) -> Self {
        Self {
            limit,
            process,
            held: 0,
            reading: 0,
            admitted: false,
            owed: VecDeque::new(),
            kept: 0,
        }
    }

    /// Bytes this connection holds.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// What the connection has committed to: everything it holds but the
    /// bytes in its read buffer.
    fn committed(&self) -> usize {
        self.held - self.reading
    }

    /// Whether a new frame may be read from the socket, once the read buffer
    /// is empty. (A frame already started is always read to its end: its
    /// bytes were reserved when its length was read.)
    pub(crate) fn full_for_reading(&self) -> Option<Full> {
        let committed = self.committed();
        // What the chain keeps waits for the client's next request to be
        // taken or dropped: never stop that request.
        if self.kept > 0 && committed == self.kept {
            return None;
        }
        if committed > 0 && committed >= self.limit {
            return Some(Full::Connection);
        }
        if self.process.room() == 0 {
            return Some(Full::Process);
        }
        None
    }

    /// Whether a request already in the read buffer may be handed to the
    /// chain. A connection that has committed to nothing may always forward
    /// one, whatever the process holds: so a full process still serves every
    /// connection one request at a time, as Kafka does, and frames that are
    /// read can never wait on each other.
    pub(crate) fn full_for_forwarding(&self) -> Option<Full> {
        match self.committed().saturating_sub(self.kept) {
            0 => None,
            _ => self.full_for_reading(),
        }
    }

    /// Waits until `process` (if `Some`) is below its budget; returns at once
    /// if it is, and never for `None`.
    pub(crate) async fn freed(process: Option<Arc<MemoryBudget>>) {
        let Some(process) = process else {
            return std::future::pending().await;
        };
        let notified = process.freed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        if process.room() > 0 {
            return;
        }
        notified.await;
    }

    /// The process budget, for [`ConnectionBudget::freed`].
    pub(crate) fn process(&self) -> &Arc<MemoryBudget> {
        &self.process
    }

    /// The room both budgets have now.
    pub(crate) fn room_bytes(&self) -> usize {
        self.limit
            .saturating_sub(self.held)
            .min(self.process.room())
    }

    /// The largest Fetch `max_bytes` that fits both budgets now (the read
    /// buffer aside: the fetch being forwarded leaves it).
    pub(crate) fn fetch_limit(&self) -> i32 {
        let own = self.limit.saturating_sub(self.committed());
        let room = own.min(self.process.room()).max(MIN_FETCH_MAX_BYTES);
        i32::try_from(room).unwrap_or(i32::MAX)
    }

    /// The frame being read now declares `bytes` (its length prefix and
    /// body), or 0 once no frame is started.
    pub(crate) fn set_reading(&mut self, bytes: usize) {
        let before = self.reading;
        self.reading = bytes;
        self.adjust(before, bytes);
    }

    /// The frame being read has `buffered` bytes in the read buffer and
    /// declares `declared` bytes (length prefix included; 0 until the
    /// prefix is in). Admits it (see the module doc) if it is not yet;
    /// returns whether it may be read on. Until it is admitted only its
    /// buffered bytes count.
    pub(crate) fn reading_frame(&mut self, buffered: usize, declared: usize) -> bool {
        if declared == 0 {
            self.admitted = false;
            self.set_reading(buffered);
            return true;
        }
        let want = buffered.max(declared);
        if self.admitted {
            self.set_reading(want);
            return true;
        }
        // What is buffered is held in any case (this also gives back what
        // was reserved for a frame that has left the buffer); the rest of
        // the frame's declared size only if the process has room.
        self.set_reading(buffered);
        let extra = want - buffered;
        if self.process.try_add(extra) {
            self.held += extra;
            self.reading = want;
            self.admitted = true;
            return true;
        }
        false
    }

    /// The frame being read left the read buffer (to be forwarded): the
    /// next one is admitted on its own.
    pub(crate) fn frame_taken(&mut self) {
        self.admitted = false;
    }

    /// A whole request of `frame_bytes` was handed to the chain, which now
    /// owes a response expected to be `response_bytes` (or owes nothing, for
    /// Produce with `acks=0`).
    pub(crate) fn forwarded(&mut self, frame_bytes: usize, response: Option<usize>) {
        if let Some(response_bytes) = response {
            let reserved = frame_bytes + response_bytes;
            self.owed.push_back(reserved);
            self.adjust(0, reserved);
        }
    }

    /// The oldest owed response arrived and was encoded into `encoded_bytes`
    /// waiting to be written: its reservation becomes its real size.
    pub(crate) fn answered(&mut self, encoded_bytes: usize) {
        let reserved = self.owed.pop_front().unwrap_or(0);
        self.adjust(reserved, encoded_bytes);
    }

    /// The chain now keeps `bytes` for the client beyond what it owes.
    pub(crate) fn set_kept(&mut self, bytes: usize) {
        let before = self.kept;
        self.kept = bytes;
        self.adjust(before, bytes);
    }

    /// `bytes` of encoded responses were written to the client.
    pub(crate) fn written(&mut self, bytes: usize) {
        self.adjust(bytes, 0);
    }

    /// Replaces `before` bytes of what the connection holds with `after`.
    fn adjust(&mut self, before: usize, after: usize) {
        if after > before {
            self.held += after - before;
            self.process.add(after - before);
        } else if before > after {
            let n = (before - after).min(self.held);
            self.held -= n;
            self.process.release(n);
        }
    }
}

impl Drop for ConnectionBudget {
    fn drop(&mut self) {
        self.process.release(self.held);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn a_request_is_held_from_its_length_until_its_response_is_written() {
        let process = MemoryBudget::new(100 * MIB);
        let mut c = ConnectionBudget::new(10 * MIB, Arc::clone(&process));
        c.set_reading(1000);
        assert_eq!((c.held(), process.used_bytes()), (1000, 1000));
        c.set_reading(0);
        c.forwarded(1000, Some(5000));
        assert_eq!(process.used_bytes(), 6000);
        c.answered(200);
        assert_eq!(c.held(), 200, "the estimate became the real size");
        c.written(200);
        assert_eq!((c.held(), process.used_bytes()), (0, 0));
    }

    #[test]
    fn frames_started_at_once_are_admitted_only_while_the_process_has_room() {
        // Sixteen idle connections whose reads were under way each get the
        // prefix of a 95 MiB frame at the same moment, against 256 MiB.
        let process = MemoryBudget::new(256 * MIB);
        let frame = 95 * MIB + 4;
        let mut conns: Vec<ConnectionBudget> = (0..16)
            .map(|_| ConnectionBudget::new(200 * MIB, Arc::clone(&process)))
            .collect();
        let admitted: Vec<bool> = conns
            .iter_mut()
            .map(|c| c.reading_frame(4096, frame))
            .collect();
        assert_eq!(admitted.iter().filter(|a| **a).count(), 3, "{admitted:?}");
        assert!(
            process.used_bytes() < 256 * MIB + frame,
            "over by at most one frame"
        );
        // One not admitted is read no further, and counts what it holds.
        assert!(!conns[3].reading_frame(4096, frame));
        assert_eq!(conns[3].held(), 4096);
        // Once an admitted one leaves, another gets in; the rest still wait.
        conns.remove(0);
        let waiting = conns.iter_mut().skip(2);
        let now = waiting
            .map(|c| c.reading_frame(4096, frame))
            .filter(|admitted| *admitted)
            .count();
        assert_eq!(now, 1, "one more admitted");
        assert!(process.used_bytes() < 256 * MIB + frame);
        // An admitted frame keeps its reservation as it grows, and a frame
        // taken from the buffer releases it when the next one starts.
        let c = &mut conns[0];
        assert!(c.reading_frame(50 * MIB, frame));
        assert_eq!(c.held(), frame);
        c.frame_taken();
        assert!(c.reading_frame(0, 0));
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn frames_taken_from_a_full_buffer_give_their_reservation_back() {
        // Ten pipelined frames of 100 bytes read at once: as each leaves the
        // buffer, what the connection holds for reading shrinks with it, and
        // nothing stays behind once the buffer is empty.
        let process = MemoryBudget::new(100 * MIB);
        let mut c = ConnectionBudget::new(10 * MIB, Arc::clone(&process));
        assert!(c.reading_frame(1000, 100));
        for left in (0..10).rev() {
            c.frame_taken();
            let declared = if left == 0 { 0 } else { 100 };
            assert!(c.reading_frame(left * 100, declared));
            assert_eq!(c.held(), left * 100);
        }
        assert_eq!(process.used_bytes(), 0);
    }

    #[test]
    fn a_request_without_response_is_released_when_forwarded() {
        let process = MemoryBudget::new(100 * MIB);
        let mut c = ConnectionBudget::new(10 * MIB, Arc::clone(&process));
        c.set_reading(3000);
        c.set_reading(0);
        c.forwarded(3000, None);
        assert_eq!(process.used_bytes(), 0);
    }

    #[test]
    fn the_connection_stops_at_its_limit_but_never_when_it_holds_nothing() {
        let process = MemoryBudget::new(100 * MIB);
        let mut c = ConnectionBudget::new(MIB, Arc::clone(&process));
        assert_eq!(c.full_for_reading(), None);
        c.forwarded(100, Some(2 * MIB));
        assert_eq!(
            c.full_for_reading(),
            Some(Full::Connection),
            "over its budget"
        );
        c.set_reading(100);
        assert_eq!(
            c.full_for_forwarding(),
            Some(Full::Connection),
            "what is buffered waits too"
        );
        c.set_reading(0);
        c.answered(10);
        assert_eq!(c.full_for_reading(), None, "its response arrived");
        c.written(10);
        let mut big = ConnectionBudget::new(MIB, Arc::clone(&process));
        big.set_reading(50 * MIB);
        assert_eq!(
            big.full_for_forwarding(),
            None,
            "one frame above the budget still passes"
        );
    }

    #[test]
    fn what_the_chain_keeps_counts_but_never_stops_the_next_request() {
        let process = MemoryBudget::new(4 * MIB);
        let mut keeper = ConnectionBudget::new(MIB, Arc::clone(&process));
        let other = ConnectionBudget::new(MIB, Arc::clone(&process));
        keeper.set_kept(4 * MIB);
        assert_eq!((keeper.held(), process.used_bytes()), (4 * MIB, 4 * MIB));
        assert_eq!(other.full_for_reading(), Some(Full::Process), "it counts");
        assert_eq!(keeper.full_for_reading(), None, "its next request is read");
        keeper.set_reading(100);
        assert_eq!(keeper.full_for_forwarding(), None, "and forwarded");
        keeper.set_reading(0);
        keeper.forwarded(100, Some(1000));
        assert_eq!(
            keeper.full_for_reading(),
            Some(Full::Connection),
            "owing a response on top, it waits"
        );
        keeper.set_kept(0);
        assert_eq!(process.used_bytes(), 1100, "released by the next fetch");
        drop(keeper);
        assert_eq!(process.used_bytes(), 0);
    }

    #[test]
    fn the_process_budget_stops_every_connection_and_dropping_releases() {
        let process = MemoryBudget::new(4 * MIB);
        let mut a = ConnectionBudget::new(4 * MIB, Arc::clone(&process));
        let b = ConnectionBudget::new(4 * MIB, Arc::clone(&process));
        a.forwarded(0, Some(4 * MIB));
        assert_eq!(b.full_for_reading(), Some(Full::Process));
        assert_eq!(
            b.full_for_forwarding(),
            None,
            "it holds nothing: one may go"
        );
        assert_eq!(a.full_for_forwarding(), Some(Full::Connection));
        assert_eq!(b.fetch_limit(), MIN_FETCH_MAX_BYTES as i32);
        drop(a);
        assert_eq!(process.used_bytes(), 0);
        assert_eq!(b.full_for_reading(), None);
    }

    #[test]
    fn fetches_are_clamped_to_the_room_left() {
        let process = MemoryBudget::new(64 * MIB);
        let mut a = ConnectionBudget::new(10 * MIB, Arc::clone(&process));
        assert_eq!(a.fetch_limit(), 10 * MIB as i32);
        a.forwarded(0, Some(4 * MIB));
        assert_eq!(a.fetch_limit(), 6 * MIB as i32);
        let mut b = ConnectionBudget::new(64 * MIB, Arc::clone(&process));
        b.forwarded(0, Some(57 * MIB));
        assert_eq!(
            a.fetch_limit(),
            3 * MIB as i32,
            "the process has 3 MiB left"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_connection_wakes_when_the_process_frees_memory() {
        let process = MemoryBudget::new(MIB);
        let mut a = ConnectionBudget::new(MIB, Arc::clone(&process));
        a.forwarded(0, Some(MIB));
        let waiter = tokio::spawn(ConnectionBudget::freed(Some(Arc::clone(&process))));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished(), "the process is still full");
        a.answered(0);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken once memory was released")
            .unwrap();
    }
}
