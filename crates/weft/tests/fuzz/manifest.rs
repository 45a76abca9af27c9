//! Manifest edits (`manifest.rs`).
