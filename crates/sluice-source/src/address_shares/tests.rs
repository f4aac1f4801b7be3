//! The per-address shares of the unauthenticated cap: taken, held, given back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use super::AddressShares;

#[test]
fn an_address_holds_at_most_its_share_and_gets_each_slot_back() {
    let shares = AddressShares::new(2);
    let a: IpAddr = [10, 0, 0, 1].into();
    let b: IpAddr = [10, 0, 0, 2].into();
    let first = shares.take(a).expect("first slot of a");
    let second = shares.take(a).expect("second slot of a");
    assert!(shares.take(a).is_none(), "a holds its whole share");
    let other = shares.take(b).expect("b has its own share");
    drop(first);
    let again = shares.take(a).expect("a slot given back is free again");
    assert!(shares.take(a).is_none());
    drop((second, again, other));
    assert_eq!(
        shares.addresses(),
        0,
        "an address with no slot is forgotten"
    );
}
