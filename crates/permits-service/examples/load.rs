//! The load generator (written in a later step).
fn main() {}
