//! Shared parts of the benchmarks (each benchmark is a binary under `src/bin/`).

pub mod corpus;
