//! hash_index
