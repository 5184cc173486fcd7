//! Measures how long a cache line takes to go from one core to another and back: two
//! threads bounce two counters on separate cache lines 200 000 times, in batches of
//! 1 000, and the program prints the mean and the batches' median, 90th percentile and
//! worst. On the development VM this is 90–110 ns when its two vCPUs are close and
//! 450–500 ns in phases when they are far apart; two-thread timings taken in such a phase
//! say more about the VM than about the code (ARCHITECTURE.md, "Two threads on cores far
//! apart"). Run with `cargo run --release -p nnefc-runtime --example round_trip`, before
//! and after a two-thread measurement.
//!
//! Not here: which cores the threads run on (the scheduler's choice, as for the pool).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A counter alone on its cache line (and the adjacent-line prefetcher's pair).
#[repr(align(128))]
struct Line(AtomicU64);

const BATCHES: usize = 200;
const PER_BATCH: u64 = 1000;

fn main() {
    let lines = Arc::new((Line(AtomicU64::new(0)), Line(AtomicU64::new(0))));
    let other = Arc::clone(&lines);
    let n = BATCHES as u64 * PER_BATCH;
    let echo = std::thread::spawn(move || {
        for i in 1..=n {
            while other.0.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            other.1.0.store(i, Ordering::Release);
        }
    });
    let start = Instant::now();
    let mut batches = Vec::with_capacity(BATCHES);
    for b in 0..BATCHES as u64 {
        let t = Instant::now();
        for i in b * PER_BATCH + 1..=(b + 1) * PER_BATCH {
            lines.0.0.store(i, Ordering::Release);
            while lines.1.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
        }
        batches.push(t.elapsed().as_secs_f64() / PER_BATCH as f64 * 1e9);
    }
    let mean = start.elapsed().as_secs_f64() / n as f64 * 1e9;
    echo.join().expect("the echo thread does not panic");
    batches.sort_by(f64::total_cmp);
    println!(
        "cache line round trip: mean {mean:.0} ns; batches of {PER_BATCH}: median {:.0} ns, \
         90th percentile {:.0} ns, worst {:.0} ns",
        batches[BATCHES / 2],
        batches[BATCHES * 9 / 10],
        batches[BATCHES - 1]
    );
}
