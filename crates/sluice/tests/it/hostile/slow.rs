//! Cases about time and volume: slowloris, pipelining without reading,
//! slow readers, a flood of connections.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use sluice_codec::kafka_protocol::messages::{
    ProduceRequest, produce_request::PartitionProduceData, produce_request::TopicProduceData,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind};
use sluice_testkit::delivery::ToolProcess;
use sluice_testkit::raw::{self, RawClient};
use sluice_testkit::{requests, wait};

use super::front::{
    Bystander, CONNECTION_LIMIT, FLOOD, Front, IDLE_TIMEOUT_SECS, MIB, WRITE_TIMEOUT_SECS,
    api_versions, pipeline_fetches, wait_more_acks,
};

/// Half a frame held open on the source with an idle timeout: closed when
/// the timeout passes, while a client that keeps talking is kept.
pub(crate) fn slowloris(front: &Front) {
    let case = "slowloris";
    let mut busy = Bystander::connect(&front.idle);
    let mut offender = RawClient::connect(&front.idle);
    let addr = offender.local_addr();
    let started = Instant::now();
    let mut half = 200i32.to_be_bytes().to_vec();
    half.extend_from_slice(&[0, 3, 0, 12]);
    offender.write_raw(&half).unwrap();
    let closed = wait::within(Duration::from_secs(20), || {
        busy.assert_served(case);
        if offender.closed_by_peer_within(Duration::from_millis(500)) {
            Ok(started.elapsed())
        } else {
            Err("open".to_owned())
        }
    });
    match closed {
        Err(_) => front.found(case, "not closed within 20 s".to_owned()),
        Ok(after) if after < Duration::from_secs(IDLE_TIMEOUT_SECS) => {
            front.found(
                case,
                format!("closed after {after:?}, before the idle timeout"),
            );
        }
        Ok(_) => {
            front.expect_close_line(case, &addr, &format!("idle for {IDLE_TIMEOUT_SECS}s"));
        }
    }
}

pub(crate) const WRITE_DEADLINE: &str = "(write_timeout_secs); closing to release them";

/// Pipelined fetches, never read: closed at the write deadline.
pub(crate) fn pipelined_fetches(front: &Front, topic: &str) {
    let case = "pipelined fetches";
    let mut bystander = Bystander::connect(&front.plain);
    let mut greedy = RawClient::connect(&front.plain);
    let addr = greedy.local_addr();
    // 300 answers of up to 6 MiB: far more than the sockets hold.
    let started = Instant::now();
    pipeline_fetches(&mut greedy, topic, 300);
    if let Some(line) = front.expect_close_line(case, &addr, WRITE_DEADLINE) {
        if !line.contains(" WARN ") {
            front.found(case, format!("not a warning: {line}"));
        }
        if started.elapsed() < Duration::from_secs(WRITE_TIMEOUT_SECS) {
            front.found(case, format!("closed before the deadline: {line}"));
        }
    }
    bystander.assert_served(case);
}

/// Partitions of the topic the Produce pipeliner writes to: each request
/// names them all, so that each answer is about 2 KiB and a few thousand
/// fill the sockets.
pub(crate) const PRODUCE_PARTITIONS: i32 = 60;

/// Pipelined Produce requests, never read, on a socket with a small receive
/// buffer: once the answers fill the sockets, closed at the write deadline.
pub(crate) fn pipelined_produces(front: &Front, topic: &str) {
    let case = "pipelined produces";
    let mut bystander = Bystander::connect(&front.plain);
    let mut greedy = RawClient::connect_with_receive_buffer(&front.plain, 4096);
    let addr = greedy.local_addr();
    greedy.set_write_timeout(Some(Duration::from_secs(60)));
    let batch = requests::record_batch("p");
    let partitions = (0..PRODUCE_PARTITIONS)
        .map(|p| {
            PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch.clone()))
        })
        .collect();
    let produce = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(StrBytes::from_string(topic.to_owned()).into())
                .with_partition_data(partitions),
        ]);
    let one = raw::encode(ApiKey::Produce, 9, 1, RequestKind::Produce(produce));
    // 64 requests per write; Sluice routes by its own correlation ids.
    let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 64).collect();
    let started = Instant::now();
    let mut sent = 0usize;
    let ended = loop {
        match greedy.write_raw(&many) {
            Ok(()) => sent += 64,
            Err(e) => break e,
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "Sluice still reads after {sent} produces"
        );
    };
    eprintln!(
        "{case}: {sent} sent in {:?}, then {ended}",
        started.elapsed()
    );
    if matches!(ended.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
        front.found(
            case,
            format!("the write stalled for 60 s without Sluice closing, after {sent} produces"),
        );
    } else {
        front.expect_close_line(case, &addr, WRITE_DEADLINE);
    }
    bystander.assert_served(case);
}

/// A client owed far more than the sockets hold that reads 512 KiB every
/// 250 ms (2 MiB/s), for three write deadlines: its reads keep bytes
/// leaving, so it is not cut.
pub(crate) fn slow_reader(front: &Front, topic: &str) {
    let case = "slow reader";
    let mut slow = RawClient::connect(&front.plain);
    let addr = slow.local_addr();
    // At least 512 KiB each (a record), whatever their max_bytes is lowered to.
    pipeline_fetches(&mut slow, topic, 100);
    let until = Instant::now() + Duration::from_secs(3 * WRITE_TIMEOUT_SECS);
    let mut buf = vec![0u8; MIB / 2];
    while Instant::now() < until {
        let mut chunk = 0;
        while chunk < buf.len() {
            match slow.read_within(&mut buf[chunk..], Duration::from_secs(2)) {
                Ok(n) if n > 0 => chunk += n,
                other => {
                    front.found(case, format!("the read ended: {other:?}"));
                    return;
                }
            }
        }
        // The reader's pace, not a synchronisation.
        thread::sleep(Duration::from_millis(250));
    }
    front.expect_not_closed(case, &addr);
}

/// A client that reads one byte per second. Owed less than the sockets
/// hold, it is never cut: Sluice has written everything. Owed more, its
/// reads free too little for the client's kernel to open its window (TCP
/// reopens it a segment at a time), so Sluice's write makes no progress and
/// it is closed at the write deadline like a client that stopped reading.
pub(crate) fn one_byte_per_second(front: &Front, topic: &str) {
    let case = "one byte per second";
    let mut small = RawClient::connect(&front.plain);
    let mut large = RawClient::connect(&front.plain);
    let (small_addr, large_addr) = (small.local_addr(), large.local_addr());
    small.send(ApiKey::Metadata, 12, requests::metadata(&[topic]));
    pipeline_fetches(&mut large, topic, 20);
    let started = Instant::now();
    let mut byte = [0u8; 1];
    for _ in 0..(2 * WRITE_TIMEOUT_SECS + 2) {
        for client in [&mut small, &mut large] {
            // Errors are the large one's close, checked below.
            let _ = client.read_within(&mut byte, Duration::from_millis(200));
        }
        // The reader's pace, not a synchronisation.
        thread::sleep(Duration::from_secs(1));
    }
    front.expect_not_closed(&format!("{case}, owed little"), &small_addr);
    if let Some(line) =
        front.expect_close_line(&format!("{case}, owed much"), &large_addr, WRITE_DEADLINE)
        && started.elapsed() < Duration::from_secs(WRITE_TIMEOUT_SECS)
    {
        front.found(case, format!("closed before the deadline: {line}"));
    }
}

/// 2,000 connections at once against a hard limit of 500: the excess is
/// refused with one line each, every connection already open (the
/// producer's, the consumer's, a bystander's) keeps being served, and the
/// slots come back when the flood leaves.
pub(crate) fn flood(front: &Front, producer: &mut ToolProcess) {
    let case = "flood";
    let mut bystander = Bystander::connect(&front.plain);
    let source = ["source=\"kafka\""];
    let rejected = || {
        front.sluice.metric(
            "sluice_client_connections_rejected_total",
            &["reason=\"limit\""],
        )
    };
    let open = || {
        front
            .sluice
            .metric("sluice_client_connections_open", &source)
    };
    let before = rejected();
    let open_before = open();
    let flood: Vec<TcpStream> = thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    (0..FLOOD / 8)
                        .map(|_| TcpStream::connect(&front.plain).expect("flood connect"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let over = FLOOD as f64 - (CONNECTION_LIMIT as f64 - open_before);
    let refused = wait::within(Duration::from_secs(30), || {
        let refused = rejected() - before;
        (refused >= over && open() <= CONNECTION_LIMIT as f64)
            .then_some(refused)
            .ok_or(format!("{refused} of {over} refused, {} open", open()))
    });
    match refused {
        Err(seen) => front.found(case, format!("the excess was not refused: {seen}")),
        Ok(refused) => {
            let lines = front
                .log()
                .lines()
                .filter(|l| {
                    l.contains("refused, source kafka is at its hard limit of 500 connections")
                })
                .count();
            if lines as f64 != refused {
                front.found(case, format!("{lines} refusal lines for {refused} refused"));
            }
        }
    }
    // Those already connected keep being served during the flood.
    bystander.assert_served(case);
    wait_more_acks(producer, 50);
    drop(flood);
    wait::until(Duration::from_secs(30), "the flood's slots freed", || {
        (open() <= open_before)
            .then_some(())
            .ok_or(format!("{} open", open()))
    });
    // New clients are served again.
    let mut after = RawClient::connect(&front.plain);
    api_versions(&mut after);
}
