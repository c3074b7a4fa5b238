//! # permits-testkit
//!
//! Test support shared by the permits crates' tests and benchmarks; never shipped in a host. [`generate`]
//! writes seeded synthetic policies (benchmarks, property tests, the `gen` example).

pub mod generate;
