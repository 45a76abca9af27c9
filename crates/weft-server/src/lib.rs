//! RESP server over Weft. Not built yet: see the `weft serve` issue.
