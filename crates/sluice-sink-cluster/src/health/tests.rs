//! The health record on paused time: down windows, suspect marks and WARN
//! windows, and when a broker was last heard from by any connection.

use super::*;

fn broker() -> BrokerAddress {
    BrokerAddress::new("127.0.0.1", 9092).with_id(2)
}

#[tokio::test(start_paused = true)]
async fn a_failed_connect_marks_the_broker_down_for_a_doubling_window() {
    let health = Health::default();
    let b = broker();
    assert!(
        health.check_down(&b, Instant::now()).is_ok(),
        "nothing known yet"
    );

    health.connected(&b, None, Instant::now());
    let err = health.check_down(&b, Instant::now()).unwrap_err();
    assert!(matches!(err, BrokerError::Down { retry_in, .. } if retry_in == FIRST_WINDOW));
    assert!(sluice_error::ErrorClass::retriable(&err));
    assert!(!err.request_may_have_been_sent());

    tokio::time::advance(FIRST_WINDOW).await;
    assert!(
        health.check_down(&b, Instant::now()).is_ok(),
        "the window is over: one real attempt"
    );
    health.connected(&b, None, Instant::now());
    tokio::time::advance(FIRST_WINDOW).await;
    assert!(
        health.check_down(&b, Instant::now()).is_err(),
        "the second window is twice as long"
    );
    tokio::time::advance(FIRST_WINDOW).await;
    assert!(health.check_down(&b, Instant::now()).is_ok());
}

#[tokio::test(start_paused = true)]
async fn the_window_stops_growing_and_a_success_clears_it() {
    let health = Health::default();
    let b = broker();
    for _ in 0..40 {
        health.connected(&b, None, Instant::now());
    }
    let Err(BrokerError::Down { retry_in, .. }) = health.check_down(&b, Instant::now()) else {
        panic!("down");
    };
    assert_eq!(retry_in, MAX_WINDOW);
    // The same broker before it had an id is the same broker.
    let unnamed = BrokerAddress::new("127.0.0.1", 9092);
    assert!(health.check_down(&unnamed, Instant::now()).is_err());
    let other = BrokerAddress::new("127.0.0.1", 9093);
    assert!(health.check_down(&other, Instant::now()).is_ok());

    health.connected(&b, Some(Heard::default()), Instant::now());
    assert!(health.check_down(&b, Instant::now()).is_ok());
    health.connected(&b, None, Instant::now());
    let Err(BrokerError::Down { retry_in, .. }) = health.check_down(&b, Instant::now()) else {
        panic!("down");
    };
    assert_eq!(retry_in, FIRST_WINDOW, "a success starts the doubling over");
}

#[test]
fn warns_once_per_broker_per_window_and_counts_the_rest() {
    let health = Health::default();
    let one = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
    let two = BrokerAddress::new("127.0.0.1", 9093).with_id(2);
    let t0 = Instant::now();
    assert_eq!(health.failed(&one, t0), Verdict::Warn { quieted: 0 });
    for k in 1..=5 {
        let at = t0 + Duration::from_secs(k);
        assert_eq!(health.failed(&one, at), Verdict::Quiet, "{k}s");
    }
    // Another broker has its own window.
    let at = t0 + Duration::from_secs(5);
    assert_eq!(health.failed(&two, at), Verdict::Warn { quieted: 0 });
    // The same broker before it had an id is the same broker.
    let unnamed = BrokerAddress::new("127.0.0.1", 9092);
    assert_eq!(health.failed(&unnamed, at), Verdict::Quiet);
    let after = t0 + WARN_EVERY;
    assert_eq!(health.failed(&one, after), Verdict::Warn { quieted: 6 });
    assert_eq!(health.failed(&one, after), Verdict::Quiet);
    let later = after + WARN_EVERY * 3;
    assert_eq!(health.failed(&one, later), Verdict::Warn { quieted: 1 });
}

#[test]
fn a_broker_is_suspect_for_a_while_after_each_failure() {
    let health = Health::default();
    let one = BrokerAddress::new("127.0.0.1", 9092).with_id(1);
    let two = BrokerAddress::new("127.0.0.1", 9093).with_id(2);
    let t0 = Instant::now();
    assert!(!health.is_suspect(&one, t0), "no failure yet");
    health.failed(&one, t0);
    assert!(health.is_suspect(&one, t0 + SUSPECT_FOR - Duration::from_millis(1)));
    assert!(!health.is_suspect(&two, t0), "only the failed broker");
    // A quieted failure extends the suspicion.
    health.failed(&one, t0 + Duration::from_secs(5));
    assert!(health.is_suspect(&one, t0 + SUSPECT_FOR + Duration::from_secs(1)));
    assert!(!health.is_suspect(&one, t0 + Duration::from_secs(5) + SUSPECT_FOR));
    // Unaddressed failures are rate-limited, never suspect.
    assert_eq!(
        health.failed_unaddressed("broker 3".to_owned(), t0),
        Verdict::Warn { quieted: 0 }
    );
}

#[tokio::test(start_paused = true)]
async fn a_broker_is_heard_when_any_connection_to_it_is_answered() {
    let health = Health::default();
    let b = broker();
    let (first, second) = (Heard::default(), Heard::default());
    health.connected(&b, Some(first.clone()), Instant::now());
    health.connected(&b, Some(second.clone()), Instant::now());
    assert_eq!(
        health.quiet_for(&b, Instant::now()),
        None,
        "an accepted connection is not an answer"
    );
    tokio::time::advance(Duration::from_secs(5)).await;
    second.answered();
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        health.quiet_for(&b, Instant::now()),
        Some(Duration::from_secs(1)),
        "the first connection is quiet, the broker is not"
    );
    // A connection that is gone still counts with its last answer.
    drop(second);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        health.quiet_for(&b, Instant::now()),
        Some(Duration::from_secs(2))
    );
    first.answered();
    assert_eq!(health.quiet_for(&b, Instant::now()), Some(Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn answers_heard_by_another_sink_of_the_process_count() {
    let (one, two) = (Health::process_wide(), Health::process_wide());
    // An address no other test uses: the process-wide record is shared.
    let b = BrokerAddress::new("192.0.2.7", 9092);
    let heard = Heard::default();
    one.connected(&b, Some(heard.clone()), Instant::now());
    tokio::time::advance(Duration::from_secs(3)).await;
    heard.answered();
    assert_eq!(two.quiet_for(&b, Instant::now()), Some(Duration::ZERO));
    assert_eq!(
        Health::default().quiet_for(&b, Instant::now()),
        None,
        "a record made for a test hears only its own connections"
    );
    assert!(
        two.check_down(&b, Instant::now()).is_ok() && !two.is_suspect(&b, Instant::now()),
        "down and suspect marks stay per sink"
    );
}
