//! Authentication for Sluice: SCRAM and PLAIN clients for broker connections,
//! and the delegation-token task behind "SCRAM over mTLS".
//!
//! With `authorize_scram_over_mtls`, a client authenticates to Sluice with
//! SCRAM as some user; Sluice creates a Kafka delegation token owned by that
//! user over a private super-user mTLS connection, and authenticates its own
//! broker connections for the client with SCRAM using the token. The broker
//! then authorizes every request as the user, exactly as if the client had
//! connected directly.
//!
//! - [`scram`]: the SCRAM client (SHA-256/SHA-512, extensions), re-exported
//!   from `sluice-scram`, which has no IO so that the fuzz targets build it
//!   without a runtime.
//! - `sasl`: SaslHandshake/SaslAuthenticate on a fresh broker connection.
//! - [`token`]: the per-sink delegation-token task.
//! - [`error`]: the crate's error, [`AuthError`].
//! - `names`: the metrics this crate records.

#![deny(missing_docs)]

pub mod error;
mod request;
mod sasl;
pub mod token;

pub use error::AuthError;
pub use sasl::{
    SaslReply, SaslSession, authenticate_plain, authenticate_scram, authenticate_token,
    sasl_authenticate, sasl_handshake,
};
pub use sluice_scram as scram;
pub use sluice_scram::{ScramClient, ScramError, ScramMechanism};
pub use token::{
    CreatedToken, DelegationToken, TokenCreator, TokenReceiver, TokenSettings, TokenTask,
    TokenTaskHandle,
};
