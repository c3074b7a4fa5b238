//! The runtime's integration tests, one binary, on tables alone: no parser, no compiler.

mod fuzz_regressions;
mod holes;
