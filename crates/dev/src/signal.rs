//! Process signals a command needs set before it prints.
//!
//! Here because it needs `unsafe` (a C library call), which only `dev` and `mbuf` may
//! use.

/// Restores SIGPIPE's default action (end the process quietly), which Rust's runtime
/// replaces with "ignore" at start. A command whose output goes to a pipe the reader
/// closed early (`mpstack demo | head`) then ends as `cat` or `netstat` would,
/// instead of failing on its next `println!`. Only for commands that write to
/// nothing but their standard output and files: a node serving sockets must keep
/// SIGPIPE ignored, so that a peer that went away is an error on its socket, not the
/// end of the node.
pub fn default_sigpipe() {
    #[cfg(unix)]
    {
        // SAFETY: signal(2) with a valid signal number and SIG_DFL has no memory
        // preconditions; called before the command starts any thread of its own.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}
