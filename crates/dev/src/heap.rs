//! The process heap: giving memory freed in bulk back to the system.
//!
//! Here because it needs `unsafe` (a C library call), which only `dev` and `mbuf` may
//! use.

/// Returns the heap's free memory to the system where the C library can: glibc's
/// `malloc_trim(0)`, which releases whole free pages in every arena, in the middle
/// of a heap as well as at its top. glibc gives back on its own only what is free at
/// the top of a heap, so after thousands of connections close, the memory they held
/// would otherwise stay resident, waiting to be reused. Costs a walk of the free
/// lists (milliseconds for a hundred megabytes); call it after a bulk of frees, not
/// per free. Whether any memory was returned; elsewhere than glibc, does nothing.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim has no preconditions and no pointer arguments; it takes
        // the allocator's own locks, so any thread may call it at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
