//! Shared support of the property, differential and adversarial tests: a generator of small random
//! packages ([`generator`]) and a naive reading of the spec over the generator's own structure ([`spec`]).
#![allow(
    dead_code,
    reason = "each test file uses a different part of the support"
)]

pub mod generator;
pub mod spec;
