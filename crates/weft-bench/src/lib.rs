//! Benchmark workloads for Weft. STUB.
