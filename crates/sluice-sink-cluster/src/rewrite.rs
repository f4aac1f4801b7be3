//! Response rewriting that hides the real brokers.
