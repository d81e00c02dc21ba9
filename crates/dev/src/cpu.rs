//! The CPU as the benchmarks see it: the time-stamp counter (cycles, for "cycles per
//! packet") and pinning a worker thread to one CPU.
//!
//! Here because both need `unsafe` (an intrinsic, a system call), which only `dev`
//! and `mbuf` may use.

use std::time::{Duration, Instant};

/// The time-stamp counter, or `None` where there is none (not x86-64).
///
/// On CPUs with `constant_tsc` (every x86-64 of the last fifteen years) it counts at a
/// fixed rate whatever the core's clock does, so it measures time in "nominal cycles";
/// [`tsc_hz`] says how many a second.
#[inline]
pub fn rdtsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86-64 CPU and only reads a counter; it has no
        // memory effects and no preconditions.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The time-stamp counter's rate in ticks a second, measured against the monotonic
/// clock over `over` (50 ms gives four significant digits); `None` without one.
pub fn tsc_hz(over: Duration) -> Option<f64> {
    let (t0, c0) = (Instant::now(), rdtsc()?);
    while t0.elapsed() < over {
        std::hint::spin_loop();
    }
    let (c1, t1) = (rdtsc()?, t0.elapsed());
    Some(c1.wrapping_sub(c0) as f64 / t1.as_secs_f64())
}

/// CPU time the calling thread has used (user and system), or `None` if the clock
/// cannot be read. Beside wall time, it tells how much of a run a thread really had
/// a core for, on a machine shared with other work.
pub fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// CPU time used so far by each thread of this process whose name starts with
/// `prefix`, as (name, time), from `/proc/self/task/*/schedstat` (time on a CPU, in
/// nanoseconds): how a benchmark measures the cost per packet of worker threads it
/// did not start itself. Empty where /proc cannot be read.
pub fn threads_cpu_time(prefix: &str) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        let name = comm.trim_end();
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(p.join("schedstat")) else {
            continue;
        };
        if let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse().ok()) {
            out.push((name.to_string(), Duration::from_nanos(ns)));
        }
    }
    out.sort();
    out
}

/// The CPUs this thread may run on, in order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE, the set's capacity.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// Pins the calling thread to CPU `cpu` (an index as the kernel numbers CPUs).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_tsc_advances_at_a_plausible_rate() {
        let a = rdtsc().unwrap();
        let b = rdtsc().unwrap();
        assert!(b >= a);
        let hz = tsc_hz(Duration::from_millis(20)).unwrap();
        assert!(hz > 1e8 && hz < 1e10, "{hz}");
    }

    #[test]
    fn thread_cpu_time_advances_while_spinning() {
        // Spins until the thread has run 5 ms: on a loaded machine 20 ms of wall
        // time gave it less than 4 ms, so the wall clock only bounds the wait.
        let a = thread_cpu_time().unwrap();
        let t = Instant::now();
        let mut b = a;
        while b - a < Duration::from_millis(5) && t.elapsed() < Duration::from_secs(30) {
            for _ in 0..1000 {
                std::hint::spin_loop();
            }
            b = thread_cpu_time().unwrap();
        }
        assert!(b - a >= Duration::from_millis(5), "{:?}", b - a);
    }

    #[test]
    fn a_thread_can_be_pinned_to_an_allowed_cpu() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [last]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(usize::MAX).is_err());
    }
}
