//! Clocks: this thread's CPU time (what the tables report) and wall time.

use std::time::Instant;

/// Nanoseconds of CPU time used by the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
#[inline]
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One measurement: thread CPU time and wall time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub cpu_ns: u64,
    pub wall_ns: u64,
}

/// Runs `f`, returning its result and how long it took.
#[inline]
pub fn time<T>(f: impl FnOnce() -> T) -> (T, Sample) {
    let w0 = Instant::now();
    let c0 = thread_cpu_ns();
    let r = f();
    let c1 = thread_cpu_ns();
    let wall_ns = w0.elapsed().as_nanos() as u64;
    (r, Sample { cpu_ns: c1 - c0, wall_ns })
}

/// The cost of one empty `time` call (median of many), to state next to the numbers.
pub fn overhead() -> Sample {
    let mut cpu: Vec<u64> = Vec::new();
    let mut wall: Vec<u64> = Vec::new();
    for _ in 0..10_001 {
        let ((), s) = time(|| ());
        cpu.push(s.cpu_ns);
        wall.push(s.wall_ns);
    }
    cpu.sort_unstable();
    wall.sort_unstable();
    Sample { cpu_ns: cpu[cpu.len() / 2], wall_ns: wall[wall.len() / 2] }
}

/// Nearest-rank percentile of sorted values (`p` in 0..=100).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
