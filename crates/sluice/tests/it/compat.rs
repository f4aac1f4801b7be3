//! The client compatibility matrix on the suite's brokers: six Kafka client
//! libraries run the programs under `compat/` through two Sluice nodes in
//! front of the shared cluster `trio` (the suite's Kafka), with PLAINTEXT
//! and with SCRAM over mTLS; the machinery is `compat/matrix.rs`, which the
//! `compat` test binary (`compat.rs`) runs on the older broker releases.

use sluice_testkit::cluster::TRIO;

#[path = "../compat/matrix.rs"]
mod matrix;

#[test]
fn every_client_library_works_through_two_sluice_nodes() {
    matrix::matrix(TRIO);
}
