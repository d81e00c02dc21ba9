//! How an application waits for its home worker: a [`Parker`] holds a parked thread
//! (blocking sockets) and a reader's and a writer's task waker (async sockets, feature
//! `tokio`); the worker's `wake` wakes all of them.
//!
//! The handshake is Dekker's: the application registers, raises `waiting`, then checks
//! its condition again; the worker publishes its news (bytes in a channel, a flag),
//! then reads `waiting`. A `SeqCst` fence on each side between its write and its read
//! makes sure that at least one of them sees the other: either the re-check finds the
//! news or the worker finds the flag. Acquire/release alone would let both read the old
//! value (a store may pass a later load, on x86 too), and a task waker, unlike a parked
//! thread, has no time slice to recover a lost wake-up with.
//!
//! When nobody waits, the worker pays that fence and one load; the lock is taken only
//! when somebody registered since the last wake-up.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Which task slot a waker goes in: a socket has at most one reading and one writing
/// task waiting (as with tokio's own sockets, the last one to register wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    Read,
    Write,
}

/// The waiters of one socket.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    /// Per side (read, write): somebody registered since the last wake-up.
    waiting: [AtomicBool; 2],
    waiters: Mutex<Waiters>,
}

/// Per side (read, write): a parked thread and a task. A reader and a writer
/// blocked on one `&TcpStream` from two threads each have their own slot.
#[derive(Debug, Default)]
struct Waiters {
    thread: [Option<Thread>; 2],
    task: [Option<Waker>; 2],
}

fn side(i: Interest) -> usize {
    match i {
        Interest::Read => 0,
        Interest::Write => 1,
    }
}

impl Parker {
    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True if somebody may be waiting (worker side, after publishing its news).
    #[inline]
    pub fn has_waiter(&self) -> bool {
        fence(Ordering::SeqCst);
        self.waiting[0].load(Ordering::Acquire) || self.waiting[1].load(Ordering::Acquire)
    }

    /// Wakes every waiter (worker side, after publishing its news).
    #[inline]
    pub fn wake(&self) {
        if self.has_waiter() {
            self.wake_side(0);
            self.wake_side(1);
        }
    }

    /// Wakes the waiters of one side only (worker side): a writer need not be woken
    /// for bytes to read, nor a reader for room to write.
    #[inline]
    pub fn wake_one(&self, i: Interest) {
        fence(Ordering::SeqCst);
        if self.waiting[side(i)].load(Ordering::Acquire) {
            self.wake_side(side(i));
        }
    }

    #[cold]
    fn wake_side(&self, k: usize) {
        if !self.waiting[k].swap(false, Ordering::AcqRel) {
            return;
        }
        let task = {
            let mut w = self.waiters();
            if let Some(t) = w.thread[k].take() {
                t.unpark();
            }
            w.task[k].take()
        };
        // Outside the lock: a waker may run code of the executor's.
        if let Some(t) = task {
            t.wake();
        }
    }

    /// Raises `waiting` after a registration; the caller re-checks its condition next.
    fn announce(&self, k: usize) {
        self.waiting[k].store(true, Ordering::Release);
        fence(Ordering::SeqCst);
    }

    /// Registers a task's waker for `interest` (application side). The caller must
    /// re-check its condition afterwards and return `Pending` only if it still fails.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub fn register(&self, interest: Interest, waker: &Waker) {
        let k = side(interest);
        {
            let mut w = self.waiters();
            match &w.task[k] {
                Some(old) if old.will_wake(waker) => {}
                _ => w.task[k] = Some(waker.clone()),
            }
        }
        self.announce(k);
    }

    /// Parks the calling thread until `ready()` or the deadline; returns `ready()`
    /// (application side).
    pub fn wait(
        &self,
        interest: Interest,
        deadline: Option<Instant>,
        ready: impl Fn() -> bool,
    ) -> bool {
        let k = side(interest);
        // Threads sleep in slices, as a guard: two threads waiting on one side of a
        // socket take the slot from each other.
        let slice = Duration::from_millis(100);
        loop {
            if ready() {
                return true;
            }
            self.waiters().thread[k] = Some(std::thread::current());
            self.announce(k);
            // `waiting` stays raised on the way out: a task may have registered too,
            // and the worker's next wake-up lowers it.
            if ready() {
                return true;
            }
            match deadline {
                None => std::thread::park_timeout(slice),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return ready();
                    }
                    std::thread::park_timeout((d - now).min(slice));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wake_without_waiters_does_nothing() {
        let p = Parker::default();
        assert!(!p.has_waiter());
        p.wake();
        assert!(!p.has_waiter());
    }

    #[test]
    fn wake_wakes_the_reader_and_the_writer_once() {
        let p = Parker::default();
        let (r, w) = (Arc::new(Count::default()), Arc::new(Count::default()));
        p.register(Interest::Read, &Waker::from(r.clone()));
        p.register(Interest::Write, &Waker::from(w.clone()));
        assert!(p.has_waiter());
        p.wake();
        p.wake();
        assert_eq!(r.0.load(Ordering::SeqCst), 1);
        assert_eq!(w.0.load(Ordering::SeqCst), 1);
        assert!(!p.has_waiter());
    }

    #[test]
    fn a_later_waker_replaces_the_earlier_one() {
        let p = Parker::default();
        let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
        p.register(Interest::Read, &Waker::from(a.clone()));
        p.register(Interest::Read, &Waker::from(b.clone()));
        p.wake();
        assert_eq!(a.0.load(Ordering::SeqCst), 0);
        assert_eq!(b.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_parked_thread_is_woken_by_the_worker() {
        let p = Arc::new(Parker::default());
        let flag = Arc::new(AtomicBool::new(false));
        let (p2, f2) = (p.clone(), flag.clone());
        let t0 = Instant::now();
        let h = std::thread::spawn(move || {
            p2.wait(
                Interest::Read,
                Some(Instant::now() + Duration::from_secs(10)),
                || f2.load(Ordering::Acquire),
            )
        });
        while !p.has_waiter() {
            std::thread::yield_now();
        }
        flag.store(true, Ordering::Release);
        p.wake();
        assert!(h.join().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
