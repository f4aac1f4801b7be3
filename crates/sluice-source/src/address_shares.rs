//! The per-address shares of the unauthenticated-connection cap: one client
//! IP address may hold at most so many of its slots, so that one address
//! re-opening sockets that never authenticate cannot lock every other client
//! out. The listener takes a slot at accept ([`AddressShares::take`]); the
//! connection holds it ([`AddressSlot`]) until it authenticates or closes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

#[cfg(test)]
mod tests;

/// How many unauthenticated connections each client address holds, up to
/// `max` each.
#[derive(Debug)]
pub(crate) struct AddressShares {
    max: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl AddressShares {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// How many slots one address may hold.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// One more connection from `ip`, unless it holds its whole share.
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            shares: Arc::clone(self),
            ip,
        })
    }

    /// How many addresses hold a slot now.
    #[cfg(test)]
    pub(crate) fn addresses(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One unauthenticated connection of an address; given back on drop.
#[derive(Debug)]
pub(crate) struct AddressSlot {
    shares: Arc<AddressShares>,
    ip: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}
