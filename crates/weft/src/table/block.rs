//! Data and index blocks. STUB.

/// A decoded block.
pub struct Block {
    _data: Vec<u8>,
}
