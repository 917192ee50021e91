//! Discrete-event simulations of whole pipelines on a Manual clock: no
//! devices, no sleeping. The loop jumps the clock to the earlier of the next
//! arrival and the pipeline's next event.

use tunbench_link::model::StageCounters;
use tunbench_link::packet::Packet;
use tunbench_link::pipeline::{Direction, Pipeline};
use tunbench_link::spec::parse;
use tunbench_link::time::{Clock, Instant, Manual};

#[derive(Debug, Clone, PartialEq)]
struct Run {
    /// (packet id, departure ns)
    departures: Vec<(u64, u64)>,
    counters: StageCounters,
}

fn simulate(spec: &str, seed: u64, dir: Direction, arrivals: &[(u64, usize)]) -> Run {
    let mut p = Pipeline::build(&parse(spec).unwrap(), &[], seed, dir);
    let clock = Manual::new(Instant::ZERO);
    let mut departures = Vec::new();
    let mut i = 0;
    loop {
        let next_arrival = arrivals.get(i).map(|a| Instant::from_nanos(a.0));
        let next = match (next_arrival, p.next_event()) {
            (None, None) => break,
            (a, b) => a.into_iter().chain(b).min().unwrap(),
        };
        clock.set(next);
        let now = clock.now();
        while i < arrivals.len() && Instant::from_nanos(arrivals[i].0) <= now {
            p.push(Packet::synthetic(i as u64, arrivals[i].1, now), now);
            i += 1;
        }
        p.poll(now, |pkt| {
            assert!(pkt.t <= now, "departure in the future");
            departures.push((pkt.id, pkt.t.as_nanos()));
        });
    }
    assert_eq!(p.held(), 0);
    Run {
        departures,
        counters: p.counters(),
    }
}

/// `n` packets of `len` bytes every `gap_ns`.
fn cbr(n: u64, len: usize, gap_ns: u64) -> Vec<(u64, usize)> {
    (0..n).map(|i| (i * gap_ns, len)).collect()
}

#[test]
fn passthrough_is_identity() {
    let arr = cbr(1000, 1500, 1_000);
    let r = simulate("", 1, Direction::AtoB, &arr);
    let want: Vec<(u64, u64)> = (0..1000).map(|i| (i, i * 1_000)).collect();
    assert_eq!(r.departures, want);
}

#[test]
fn full_chain_conserves_packets_and_keeps_order() {
    let spec = "loss=1%,rate=10mbit,queue=50p,delay=20ms,jitter=2ms,jitter_dist=normal";
    // 1500 B every 1 ms = 12 Mbit/s offered into 10 Mbit/s: the queue fills.
    let arr = cbr(20_000, 1500, 1_000_000);
    let r = simulate(spec, 3, Direction::AtoB, &arr);
    let c = r.counters;
    assert_eq!(
        r.departures.len() as u64 + c.dropped_loss + c.dropped_queue,
        20_000
    );
    assert!(c.dropped_loss > 0 && c.dropped_queue > 0, "{c:?}");
    // no reorder configured: strictly increasing ids, non-decreasing times
    assert!(r
        .departures
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    // delivered rate over the run never exceeds 10 Mbit/s (+1 packet) and,
    // with a saturated bottleneck, comes within 1% of it
    let (first, last) = (r.departures[0].1, r.departures.last().unwrap().1);
    let bits = (r.departures.len() as f64 - 1.0) * 12_000.0;
    let rate = bits / ((last - first) as f64 / 1e9);
    assert!(rate <= 10e6 * 1.0001 && rate > 10e6 * 0.99, "{rate}");
    // one-way delay >= serialization (1.2 ms) and bounded by
    // serialization + full queue (50 * 1.2 ms) + delay + 6 sd of jitter
    // (+ FIFO clamping, covered by the generous upper margin).
    for &(id, dep) in &r.departures {
        let owd = (dep - arr[id as usize].0) as f64 / 1e6;
        assert!(owd >= 1.2 - 1e-9, "{id}: {owd}");
        assert!(owd <= 1.2 + 60.0 + 20.0 + 12.0 + 1.0, "{id}: {owd}");
    }
}

#[test]
fn rate_and_delay_compose_exactly() {
    // 1000 B every 100 us into 1 Mbit/s (8 ms each), 10-packet queue,
    // delay 30 ms: deterministic schedule. Packet k departs the link at
    // 8 ms * (k+1) while the queue holds; then +30 ms.
    let arr = cbr(5, 1000, 100_000);
    let r = simulate("rate=1mbit,queue=10p,delay=30ms", 1, Direction::AtoB, &arr);
    let want: Vec<(u64, u64)> = (0..5)
        .map(|k| (k, 8_000_000 * (k + 1) + 30_000_000))
        .collect();
    assert_eq!(r.departures, want);
}

#[test]
fn queue_bounds_the_standing_delay() {
    // Heavy overload into 5 Mbit/s with a 30 KB queue: queueing delay
    // can never exceed 30 KB * 8 / 5 Mbit/s = 48 ms plus one packet in
    // service (2.4 ms).
    let arr = cbr(5_000, 1500, 100_000);
    let r = simulate("rate=5mbit,queue=30KB", 9, Direction::BtoA, &arr);
    let max = r
        .departures
        .iter()
        .map(|&(id, dep)| dep - arr[id as usize].0)
        .max()
        .unwrap();
    assert!(max as f64 <= 48e6 + 2.4e6 + 1.0, "{max}");
    assert!(max as f64 > 45e6, "queue never filled: {max}");
    assert!(r.counters.dropped_queue > 0);
}

#[test]
fn same_seed_same_schedule_different_seed_differs() {
    let spec = "loss=2%,rate=20mbit,queue=20p,delay=10ms,jitter=3ms,reorder=1%,dup=1%";
    let arr = cbr(5_000, 1200, 400_000);
    let a = simulate(spec, 77, Direction::AtoB, &arr);
    let b = simulate(spec, 77, Direction::AtoB, &arr);
    let c = simulate(spec, 78, Direction::AtoB, &arr);
    assert_eq!(a, b);
    assert_ne!(a.departures, c.departures);
    // the other direction uses its own random streams
    let d = simulate(spec, 77, Direction::BtoA, &arr);
    assert_ne!(a.departures, d.departures);
}

#[test]
fn reorder_and_dup_counts_through_the_chain() {
    let arr = cbr(50_000, 500, 200_000);
    let r = simulate(
        "delay=5ms,reorder=2%,reorder_gap=3,dup=1%",
        4,
        Direction::AtoB,
        &arr,
    );
    let c = r.counters;
    assert_eq!(r.departures.len() as u64, 50_000 + c.duplicated);
    // reorder fraction ~ p / (1 + gap p) = 1.887%; dup ~ 1% (5 sd bounds,
    // sd from the binomial: ~60 and ~44 packets)
    let want_re = 50_000.0 * 0.02 / 1.06;
    assert!((c.reordered as f64 - want_re).abs() < 5.0 * 61.0, "{c:?}");
    assert!((c.duplicated as f64 - 500.0).abs() < 5.0 * 23.0, "{c:?}");
    // out-of-order departures (ignoring duplicates) equal the reorder count
    let mut max = 0;
    let mut late = 0;
    let mut prev = None;
    for &(id, _) in &r.departures {
        if prev == Some(id) {
            continue;
        }
        prev = Some(id);
        if id < max {
            late += 1;
        }
        max = max.max(id);
    }
    assert_eq!(late, c.reordered);
}

#[test]
fn jitter_alone_never_reorders() {
    let arr = cbr(20_000, 100, 50_000);
    for dist in ["uniform", "normal"] {
        let r = simulate(
            &format!("delay=10ms,jitter=5ms,jitter_dist={dist}"),
            5,
            Direction::AtoB,
            &arr,
        );
        assert!(r.departures.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(r.counters.reordered, 0);
    }
}

#[test]
fn gilbert_elliott_through_the_pipeline() {
    // 400k packets, ge_p=1%, ge_r=25%: loss = 0.01/0.26 = 3.85%. Markov
    // chain se = sqrt(pi(1-pi)/n * (1+l)/(1-l)), l = 0.74: ~0.00078;
    // accept 5 se.
    let arr = cbr(400_000, 100, 10_000);
    let r = simulate("ge_p=1%,ge_r=25%", 12, Direction::AtoB, &arr);
    let loss = r.counters.dropped_loss as f64 / 400_000.0;
    let pi: f64 = 0.01 / 0.26;
    let se = (pi * (1.0 - pi) / 400_000.0 * (1.74 / 0.26)).sqrt();
    assert!((loss - pi).abs() < 5.0 * se, "{loss} vs {pi}");
}

/// An IPv4/UDP datagram 198.18.0.1:50000 -> 198.18.0.2:`dport` carrying
/// `payload` (checksums left zero: the models never look at them), behind
/// an all-zero virtio-net header.
fn udp_packet(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; tunbench_link::packet::VNET_HDR_LEN];
    let len = 28 + payload.len();
    let mut ip = vec![0u8; 28];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    ip[20..22].copy_from_slice(&50000u16.to_be_bytes());
    ip[22..24].copy_from_slice(&dport.to_be_bytes());
    ip[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    b.extend(ip);
    b.extend_from_slice(payload);
    b
}

#[test]
fn faults_act_before_the_link_and_every_message_is_delivered_or_dropped_once() {
    use tunbench_link::classify::{Class, Classifier};
    use tunbench_link::faults::{self, Record};
    // OpenVPN over a lossy 10 ms link: the client's first hard reset is
    // held back 5 ms by a fault, every 10th control message is dropped by
    // another, and the link loses 30% of everything.
    let faults = faults::parse(
        "match=ovpn.hard_reset_client,first=1,action=delay,delay=5ms;\
         match=ovpn.control,every=10,action=drop",
    )
    .unwrap();
    let mut p = Pipeline::build(
        &parse("delay=10ms,loss=30%").unwrap(),
        &[],
        3,
        Direction::AtoB,
    )
    .with_faults(Classifier::default(), faults, 3, Direction::AtoB);
    assert_eq!(p.stage_names(), ["faults", "loss", "delay"]);
    let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
    let opcode = |op: u8| {
        let mut payload = vec![0u8; 60];
        payload[0] = op << 3 | 2; // key id 2
        udp_packet(1194, &payload)
    };
    // packet i at i ms: 0 a hard reset (V2), then control, ack and data in turn (1000, 1000, 999)
    let kinds = [9u8, 4, 5];
    let mut departures = Vec::new();
    let mut records = Vec::new();
    let mut link_drops = Vec::new();
    for i in 0..3000u64 {
        let op = if i == 0 { 7 } else { kinds[(i % 3) as usize] };
        p.push(Packet::new(opcode(op), i, ms(i)), ms(i));
        p.poll(ms(i), |x| departures.push((x.id, x.class, x.t)));
        records.extend(p.take_fault_records());
        link_drops.extend(p.take_link_drops());
    }
    p.poll(ms(10_000), |x| departures.push((x.id, x.class, x.t)));
    link_drops.extend(p.take_link_drops());
    assert_eq!(p.held(), 0);
    // the hard reset left 15 ms after it arrived, after packets that came later (if the link kept it)
    if let Some(&(_, class, t)) = departures.iter().find(|d| d.0 == 0) {
        assert_eq!((class, t), (Class::OvpnHardResetClient, ms(15)));
    }
    let fired: Vec<(usize, u64)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Fired { fault, ordinal, .. } => Some((*fault, *ordinal)),
            _ => None,
        })
        .collect();
    assert_eq!(fired[0], (0, 1));
    assert_eq!(
        fired.len(),
        1 + 1000 / 10,
        "every 10th of 1000 control messages"
    );
    assert!(fired[1..].iter().all(|&(f, n)| f == 1 && n % 10 == 0));
    // each non-data message: dropped by a fault, lost on the link, or delivered, exactly one of them
    let mut n_msgs = 0;
    for r in &records {
        if let Record::Message {
            id, msg, dropped, ..
        } = r
        {
            n_msgs += 1;
            assert!(!msg.class.is_data());
            assert_eq!(msg.key_id, Some(2));
            let delivered = departures.iter().filter(|d| d.0 == *id).count();
            let lost = link_drops.iter().filter(|x| *x == id).count();
            assert_eq!(
                (*dropped as usize) + delivered + lost,
                1,
                "{id}: {dropped} {delivered} {lost}"
            );
        }
    }
    assert_eq!(n_msgs, 2001, "the hard reset, 1000 control and 1000 acks");
    let c = p.counters();
    assert_eq!(c.dropped_fault, 100);
    assert_eq!(
        departures.len() as u64 + c.dropped_fault + c.dropped_loss,
        3000
    );
    assert!(!link_drops.is_empty() && link_drops.len() < c.dropped_loss as usize);
}
