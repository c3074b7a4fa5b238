//! The map of names that are only looked up, never iterated into output: the index of offered triples and
//! the compiler's name resolution.
//!
//! Hashed with `rustc-hash`'s `FxBuildHasher` (rustc's own hasher, version 2: a multiply per word and a
//! final rotate that spreads the bits a bucket index reads). Names are short and come from a verified table
//! or the package being compiled, so a keyed hash against flooding buys nothing here.

/// A hash map keyed by names (see the module documentation). Only looked up, never iterated into output:
/// iteration order is not deterministic across versions of the hasher.
pub type NameMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
