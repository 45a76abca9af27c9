//! value_log
