//! The runtime agents embed (spec §5). Work in progress.
