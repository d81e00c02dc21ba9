//! Dynamic states (filled in by its own change).
