//! [`BrokerConnection::call`] against a fake broker: the typed answer, and
//! each way a call fails, with its classification.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use sluice_codec::kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
};
use sluice_codec::{ApiKey, ResponseKind};

use super::*;
use crate::BrokerConnectOptions;
use crate::test_support::{FakeBroker, FakeConn, within};

async fn connected(broker: &FakeBroker) -> (BrokerConnection, FakeConn) {
    let opts = BrokerConnectOptions::new(Duration::from_secs(5));
    let (conn, fake) = tokio::join!(
        BrokerConnection::connect(broker.address(), &opts),
        broker.accept()
    );
    (conn.unwrap(), fake)
}

const LONG: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_call_sends_its_api_with_sluices_client_id_and_returns_the_typed_answer() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker).await;
    let serve = async {
        let mut request = fake.read_request().await;
        assert_eq!(request.api_key(), ApiKey::ApiVersions);
        assert_eq!(request.api_version(), 3);
        assert_eq!(request.header().client_id.as_deref(), Some(&b"sluice"[..]));
        assert!(matches!(
            request.body().unwrap(),
            RequestKind::ApiVersions(_)
        ));
        let answer = ApiVersionsResponse::default().with_throttle_time_ms(17);
        fake.respond(&request, &ResponseKind::ApiVersions(answer))
            .await;
    };
    let call = conn.call(3, ApiVersionsRequest::default(), LONG);
    let ((), answer) = within("the call", async { tokio::join!(serve, call) }).await;
    assert_eq!(answer.unwrap().throttle_time_ms, 17);
}

#[tokio::test]
async fn an_unanswered_call_times_out_retriably() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker).await;
    let timeout = Duration::from_millis(50);
    let call = conn.call(12, MetadataRequest::default(), timeout);
    let (_request, err) = within("the call to time out", async {
        tokio::join!(fake.read_request(), call)
    })
    .await;
    let err = err.unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Timeout {
                api: ApiKey::Metadata,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().ends_with("no answer within 50ms"), "{err}");
    assert_eq!(err.broker(), Some(&broker.address()));
    assert_eq!((err.side(), err.retriable()), (ErrorSide::Broker, true));
}

#[tokio::test]
async fn a_call_on_a_closed_connection_is_not_sent() {
    let broker = FakeBroker::start().await;
    let (conn, fake) = connected(&broker).await;
    fake.reset();
    within("the connection to see the reset", async {
        while !conn.is_closed() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let err = within(
        "the call",
        conn.call(3, ApiVersionsRequest::default(), LONG),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CallError::NotSent { .. }), "{err}");
    assert!(err.broker_error().is_some());
    assert!(err.retriable(), "{err}");
}

#[tokio::test]
async fn a_connection_lost_with_the_call_owed_is_a_broker_error() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker).await;
    let serve = async {
        fake.read_request().await;
        fake.reset();
    };
    let call = conn.call(3, ApiVersionsRequest::default(), LONG);
    let ((), err) = within("the call", async { tokio::join!(serve, call) }).await;
    let err = err.unwrap_err();
    assert!(matches!(err, CallError::Broker { .. }), "{err}");
    assert_eq!(err.side(), ErrorSide::Broker);
}

#[tokio::test]
async fn an_undecodable_answer_is_a_decode_error_not_retried() {
    let broker = FakeBroker::start().await;
    let (conn, mut fake) = connected(&broker).await;
    let serve = async {
        let request = fake.read_request().await;
        // The right correlation id, then a body cut short.
        let mut frame = BytesMut::new();
        frame.put_i32(5);
        frame.put_i32(request.correlation_id());
        frame.put_u8(0);
        fake.write(&frame).await;
    };
    let call = conn.call(3, ApiVersionsRequest::default(), LONG);
    let ((), err) = within("the call", async { tokio::join!(serve, call) }).await;
    let err = err.unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Decode {
                api: ApiKey::ApiVersions,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!((err.side(), err.retriable()), (ErrorSide::Broker, false));
}
